"""The portal on several machines (issue #35): two web instances and two workers behind
HAProxy (tests/livestack.MultiStack). A job launched on instance A is followed live on a
dashboard served by instance B; A and the worker that submitted the job are killed
(SIGKILL) while it runs; the job still ends in its true state, B's dashboard sees that
change without a reload, HAProxy takes A out and serves the portal from B, and a job page
whose websocket went through HAProxy to A reconnects (to B) and catches up."""

import time
from types import SimpleNamespace

import httpx
import pytest

from jobs.models import Job, JobEvent
from tests import factories, polling
from tests.devcluster.helpers import remote
from tests.e2e.pages import fill_launch_form, page_errors, press_launch

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

# Every text the job's badge shows on the dashboard, and a mark a reload would remove.
WATCH = """(id) => {
  window.__noReload = true;
  window.__seen = [];
  const look = () => {
    const badge = document.querySelector(`tr[data-job-id="${id}"] [data-badge]`);
    const text = badge && badge.textContent.trim();
    if (text && window.__seen[window.__seen.length - 1] !== text) window.__seen.push(text);
  };
  look();
  new MutationObserver(look).observe(document.getElementById('job-table'),
    {subtree: true, childList: true, characterData: true});
}"""
# The job runs until the test lets it end (a file "go" in its work directory), at most 2 min.
WAIT_FOR_GO = "for i in $(seq 600); do [ -e go ] && exit 0; sleep 0.2; done; exit 1"
BADGE = "(id) => document.querySelector(`tr[data-job-id='${id}'] [data-badge]`)?.textContent.trim()"


def submitting_worker(stack, job_id: int) -> str:
    """The worker whose log says it ran the job's submission (the job left `queued` there:
    jobs/models/run.py logs each change; the task's own lines are below INFO)."""
    for name in stack.WORKERS:
        for line in (stack.tmp / f"{name}.log").read_text().splitlines():
            if f"job {job_id}: queued -> " in line:
                return name
    raise AssertionError(f"no worker logged job {job_id}'s submission:\n{stack.logs()}")


def test_a_job_launched_on_one_instance_is_followed_on_another_after_the_first_dies(
    browser, multistack, owner
):
    stack = multistack
    factories.image("python-host", "Python (host)", description="The node's own Python.")
    a, b = stack.web_urls["web-a"], stack.web_urls["web-b"]

    # Signed in on A; the session (in the database) is good on B: cookies go by host.
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{a}/accounts/login/")
    page.get_by_label("User name").fill("owner")
    page.get_by_label("Password").fill("owner-pass-123")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{a}/")
    dashboard = context.new_page()
    errors = page_errors(dashboard)  # (pages served by A fail when A dies, as they would)
    dashboard.goto(f"{b}/")
    dashboard.get_by_text("You have no jobs yet.").wait_for()

    # Launched from A's form; its row appears on B's dashboard through the shared layer.
    instance_a = SimpleNamespace(url=a)
    fill_launch_form(page, instance_a, "Python (host)", "Batch command", WAIT_FOR_GO)
    job_id = press_launch(page, instance_a)
    dashboard.locator(f'tr[data-job-id="{job_id}"]').wait_for(timeout=20_000)
    dashboard.evaluate(WATCH, job_id)
    dashboard.wait_for_function(f"() => ({BADGE})({job_id}) === 'Running'", timeout=30_000)
    # The job's page through HAProxy, its websocket on A (B held out while it connects:
    # the job's state, sent on connecting, is the proof it is open).
    stack.set_server_state("web-b", "maint")
    proxied = context.new_page()
    page_errors(proxied, errors)
    with proxied.expect_websocket(lambda ws: ws.url.endswith(f"/ws/jobs/{job_id}/")) as opened:
        proxied.goto(f"{stack.url}/jobs/{job_id}/")
    on_a = opened.value
    on_a.wait_for_event("framereceived", timeout=10_000)
    proxied.evaluate("() => { window.__noReload = true; }")
    stack.set_server_state("web-b", "ready")

    # A, and the worker that submitted the job, die as a crashed host would.
    killed_worker = submitting_worker(stack, job_id)
    stack.kill("web-a")
    stack.kill(killed_worker)
    killed_at = time.time()
    assert Job.objects.get(pk=job_id).state == "running"

    # The portal's host still answers: HAProxy resends what could not reach A to B.
    for _ in range(10):
        assert httpx.get(f"{stack.url}/healthz", timeout=10).status_code == 200
    polling.until(
        lambda: not stack.portal_servers().get(stack.server_of("web-a")),
        20,
        "HAProxy to mark A down",
        interval=0.2,
    )
    servers = stack.portal_servers()
    assert servers == {"portal1": False, "portal2": True}, servers

    # The job ends now, after the kill, in its true state; B's dashboard shows it live.
    job = Job.objects.get(pk=job_id)
    remote(job.cluster_account, ["touch", f"{job.work_dir}/go"])
    dashboard.wait_for_function(f"() => ({BADGE})({job_id}) === 'Completed'", timeout=60_000)
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.exit_code) == ("completed", 0)
    ended = JobEvent.objects.filter(job=job, to_state="completed").latest("at")
    assert ended.at.timestamp() > killed_at  # a change made after the kill
    seen = dashboard.evaluate("() => window.__seen")
    # Followed live from when the row appeared (queued, pending or running) to the end;
    # Slurm's brief COMPLETING may be seen on the way (a sync on a loaded machine).
    ending = [s for s in seen if s != "Completing"]
    assert ending[-1] == "Completed" and ending[-2] == "Running", seen
    assert dashboard.evaluate("() => window.__noReload") is True, "the dashboard reloaded"
    # The job page whose websocket was on A reconnected through HAProxy (to B), caught up.
    proxied.locator("[data-badge]", has_text="Completed").wait_for(timeout=20_000)
    assert on_a.is_closed()
    assert proxied.evaluate("() => window.__noReload") is True, "the job page reloaded"
    assert stack.exited() == {}, stack.logs()  # nothing else died
    assert errors == []
