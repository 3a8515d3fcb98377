"""One person's login environment hangs everything they do, all at once, on `make demo`'s
own settings (#59): hpcuser2's ~/.bashrc sleeps for the account test (``whoami``), the
provenance read of a submission, the SFTP subsystem (every browse, and a transfer's
start) and rclone. hpcuser2 sends 10 submissions (accepted), then 40 account tests, 20
browses and 40 transfers at once while those hang in the worker. The stack is the
demo's: two web processes (gunicorn with the uvicorn worker), one Celery worker of two
processes, its default task limits. Throughout, demo's dashboard and ``GET
/api/v1/jobs/`` answer within 2 s, and demo's job reaches squeue within 30 s. Real sshd
(Debian's sftp-server through the login shell), Slurm, Redis."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.conf import settings

from clusters.models import ClusterAccount
from devtools import devcluster as devcluster_mod
from files.models import Remote
from identity.tokens import ApiToken
from jobs.models import Job
from tests import factories
from tests.devcluster.helpers import hanging_login
from tests.devcluster.test_web_share import browser_of, demos_answers, web_like_demo
from tests.devcluster.test_worker_bounds import in_squeue, seconds_to_squeue

# The file rewrites a ~/.bashrc and makes a reservation: it runs while no other Slurm test does (tests/conftest.py).
pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True), pytest.mark.alone]

HANGS = ["*whoami*", "*portal-provenance*", "*sftp-server*", "*rclone*"]
WATCH = 40  # seconds demo's pages are timed while hpcuser2's requests hang


def test_one_person_hanging_everything_at_once_holds_no_one_else(
    devcluster_info, owner, outsider, tmp_path, cancel_leftover_slurm_jobs
):
    assert settings.PORTAL_TASK_TIME_LIMIT == 180  # make demo's own
    cluster = devcluster_mod.register(
        devcluster_info, {owner.username: devcluster_info["default_user"], "outsider": "hpcuser2"}
    )
    account = ClusterAccount.objects.get(cluster=cluster, user=outsider)
    image = factories.image("host-at-once")
    Remote.objects.create(
        owner=outsider, name="away", kind="webdav", options={"url": "http://127.0.0.1:9/"}
    )
    _, demo_token = ApiToken.issue(owner, "demo")
    _, their_token = ApiToken.issue(outsider, "hostile")
    stack = web_like_demo(tmp_path)
    stack.start_worker()  # two processes, as `make demo` runs it
    with hanging_login("hpcuser2", HANGS, 400) as over:
        try:
            run_at_once(
                stack, cluster, account, image, owner, outsider, demo_token, their_token, over
            )
        finally:
            stack.stop()


def run_at_once(stack, cluster, account, image, owner, outsider, demo_token, their_token, over):
    hostile = browser_of(outsider, stack.url)
    csrf = hostile.cookies.get(settings.CSRF_COOKIE_NAME) or ""
    form_headers = {"X-CSRFToken": csrf, "Referer": f"{stack.url}/account/"}
    their_api = httpx.Client(
        base_url=stack.url, timeout=120, headers={"Authorization": f"Bearer {their_token}"}
    )
    demo = browser_of(owner, stack.url)
    demo_api = httpx.Client(
        base_url=stack.url, timeout=30, headers={"Authorization": f"Bearer {demo_token}"}
    )
    statuses: dict[str, list[int]] = {"test": [], "browse": [], "submit": [], "transfer": []}
    lock = threading.Lock()

    said: dict[tuple[str, int], str] = {}

    def sent(kind: str, call) -> None:
        try:
            answer = call()
        except httpx.TimeoutException:  # behind their own hanging requests: 0
            with lock:
                statuses[kind].append(0)
            return
        with lock:
            statuses[kind].append(answer.status_code)
            said.setdefault((kind, answer.status_code), answer.text[:200])

    def job_body(command: str) -> dict:
        return {"image": image.slug, "command": command, "cluster": cluster.name}

    calls = (
        [
            lambda: sent(
                "test", lambda: hostile.post(f"/account/{account.pk}/test/", headers=form_headers)
            )
        ]
        * 40
        + [lambda: sent("browse", lambda: hostile.get(f"/files/{cluster.name}/home/"))] * 20
        + [
            lambda: sent(
                "transfer",
                lambda: their_api.post(
                    "/api/v1/transfers/",
                    json={
                        "cluster": cluster.name,
                        "root": "home",
                        "path": "",
                        "remote": "away",
                        "remote_path": "x",
                        "direction": "to_remote",
                    },
                ),
            )
        ]
        * 40
    )
    # The 10 submissions first, one after another and each accepted (a submission reads
    # the cluster's reservations: more at once than the person's places get a 429),
    # their tasks then hang in the worker for the whole of what follows.
    for _ in range(10):
        answer = their_api.post("/api/v1/jobs/", json=job_body("echo x"))
        assert answer.status_code == 201, answer.text[:300]
    statuses["submit"] = [201] * 10
    theirs = Job.objects.filter(owner=outsider)
    slowest = 0.0
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        started = time.monotonic()
        demo_job, reached, submitted = None, None, 0.0
        while time.monotonic() - started < WATCH:
            slowest = max(slowest, demos_answers(demo, demo_api, said))
            if demo_job is None and time.monotonic() - started > 3:
                made = demo_api.post("/api/v1/jobs/", json=job_body("sleep 60"))
                assert made.status_code == 201, made.text[:300]
                demo_job = Job.objects.get(pk=made.json()["id"])
                submitted = time.monotonic()
            elif demo_job is not None and reached is None and in_squeue(demo_job.scheduler_name):
                reached = time.monotonic() - submitted
            time.sleep(0.2)
        assert demo_job is not None
        if reached is None:
            reached = seconds_to_squeue(demo_job.scheduler_name, submitted, 30)
        assert reached is not None and reached < 30, (
            f"demo's job not in squeue after 30 s\n{stack.logs()}"
        )
        # hpcuser2's submissions were still hanging: none reached Slurm, none was lost.
        assert theirs.count() == 10 and not theirs.exclude(scheduler_job_id="").exists()
        over.touch()  # the sleeping shells end now
        for future in futures:
            future.result()
    print(
        f"\nslowest answer to demo: {slowest:.2f} s; demo's job in squeue after {reached:.1f} s; "
        f"hpcuser2's answers: { {k: sorted(set(v)) for k, v in statuses.items()} }"
    )
    print(said)
    assert all(len(v) for v in statuses.values()), statuses
