"""The `portal` command end to end: the installed console script talks to the served
stack (gunicorn + uvicorn, Celery worker and beat) which submits to the dev cluster's
real Slurm over SSH."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from devtools import demo_catalog
from identity.tokens import ApiToken
from jobs.models import Job
from tests import polling

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

PORTAL = str(Path(sys.executable).parent / "portal")


@pytest.fixture
def portal(stack, owner, tmp_path):
    demo_catalog.load()
    _, token = ApiToken.issue(owner, "e2e")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PORTAL_URL": stack.url,
        "PORTAL_TOKEN": token,
    }

    def run(*argv, timeout=180):
        return subprocess.run(
            [PORTAL, *argv], env=env, capture_output=True, text=True, timeout=timeout
        )

    run.env = env
    return run


def test_submit_wait_returns_the_jobs_exit_code_and_its_logs(portal):
    script = 'echo "hello from $(hostname) gpus=$CUDA_VISIBLE_DEVICES"; echo oops >&2; exit 3'
    done = portal(
        "submit",
        "--container",
        "shell-host",
        "--partition",
        "gpu",
        "--gpus",
        "2",
        "--time",
        "5",
        "--name",
        "cli e2e",
        "--wait",
        "--logs",
        "--",
        script,
    )
    job_id = int(done.stdout.splitlines()[0])
    assert done.returncode == 3, done.stderr
    # --logs: the output after the job id, and stderr too since it failed.
    assert re.search(r"^hello from \S+ gpus=\d,\d$", done.stdout, re.M), done.stdout
    assert f"job {job_id}: stderr:" in done.stderr and "oops" in done.stderr.splitlines()
    states = re.findall(
        rf"^job {job_id}: (Queued|Pending|Running|Completing|Failed)", done.stderr, re.M
    )
    # A job this short may go from Pending to Failed between two syncs: Running is shown
    # when the portal saw it (the cancel test below holds a job in Running).
    assert states[0] == "Queued" and states[-1] == "Failed", done.stderr
    assert states == sorted(states, key=["Queued", "Pending", "Running", "Failed"].index)
    assert f"job {job_id}: The job exited with status 3." in done.stderr
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.exit_code, job.gpus, job.name) == ("failed", 3, 2, "cli e2e")
    assert job.scheduler_job_id and job.partition.name == "gpu"

    out = portal("logs", str(job_id))
    assert out.returncode == 0
    assert re.search(r"^hello from \S+ gpus=\d,\d$", out.stdout, re.M), out.stdout
    err = portal("logs", "--stderr", str(job_id))
    assert "oops" in err.stdout.splitlines()
    show = portal("show", str(job_id))
    assert re.search(r"^Exit code: +3$", show.stdout, re.M), show.stdout

    def with_stderr() -> str | None:  # the worker reads it just after the job ends
        out = portal("show", str(job_id)).stdout
        return out if "Last lines of stderr:" in out else None

    shown = polling.until(with_stderr, 10, "`portal show` to print the stderr's last lines")
    assert "Last lines of stderr:\n  oops" in shown, shown


def test_submit_wait_logs_of_a_job_that_succeeds_prints_its_stdout_only(portal):
    # The README's example: the cpu partition's defaults, no image named.
    done = portal(
        "submit", "--wait", "--logs", "-p", "cpu", "--", "echo result=42; echo warning >&2"
    )
    assert done.returncode == 0, done.stderr
    job_id = int(done.stdout.splitlines()[0])
    assert "result=42" in done.stdout.splitlines()[1:], done.stdout  # after the id
    assert f"job {job_id}: stdout:" in done.stderr
    assert "stderr:" not in done.stderr and "warning" not in done.stderr.splitlines()


def test_logs_follow_prints_a_running_jobs_output_once_and_stops_at_its_end(portal):
    script = "for i in $(seq 1 6); do echo line $i; sleep 1; done"
    submitted = portal("submit", "--container", "shell-host", "--partition", "cpu", "--", script)
    job_id = submitted.stdout.strip()
    assert submitted.returncode == 0 and job_id.isdigit(), submitted.stderr
    followed = portal("logs", "-f", job_id)
    assert followed.returncode == 0, followed.stderr
    # The job script's own lines ("portal: ...") frame the command's output.
    lines = [line for line in followed.stdout.splitlines() if not line.startswith("portal: ")]
    assert lines == [f"line {i}" for i in range(1, 7)], followed.stdout
    assert followed.stdout.endswith("portal: command exited with status 0\n")
    assert Job.objects.get(pk=int(job_id)).state == "completed"


def test_cancel_ends_a_waited_on_job_and_the_wait_exits_143(portal):
    waiting = subprocess.Popen(
        [
            PORTAL,
            "submit",
            "--container",
            "shell-host",
            "--partition",
            "cpu",
            "--wait",
            "--",
            "sleep 300",
        ],
        env=portal.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        job_id = waiting.stdout.readline().strip()
        assert job_id.isdigit()
        polling.until(
            lambda: Job.objects.get(pk=int(job_id)).state == "running", 60, "Slurm to run it"
        )
        cancelled = portal("cancel", job_id)
        assert cancelled.returncode == 0 and "cancelling" in cancelled.stdout, cancelled.stderr
        assert waiting.wait(timeout=120) == 143
    finally:
        waiting.kill()
    states = re.findall(rf"^job {job_id}: (\w+)", waiting.stderr.read(), re.M)
    assert states[-1] == "Cancelled" and "Running" in states


def test_a_cpu_job_needs_nothing_but_its_partition_and_command(portal):
    """`portal submit --partition cpu -- 'echo hi'`: the partition's defaults (no GPU)."""
    done = portal("submit", "--partition", "cpu", "--wait", "--", "echo hi")
    assert done.returncode == 0, done.stderr
    job = Job.objects.get(pk=int(done.stdout.strip()))
    assert (job.state, job.gpus, job.gpu_type, job.cpus, job.memory_gb) == (
        "completed",
        0,
        "",
        2,
        4,
    )
    assert "hi" in portal("logs", str(job.pk)).stdout.splitlines()


def test_three_default_jobs_run_side_by_side(portal):
    """Defaults are the partition's (1 GPU, 2 CPUs, 4 GB on the dev cluster's gpu
    partition), so three jobs share the one node instead of queueing behind each other."""
    ids = []
    for _ in range(3):
        submitted = portal("submit", "--", "sleep 120")
        assert submitted.returncode == 0, submitted.stderr
        ids.append(int(submitted.stdout.strip()))
    try:
        polling.until(
            lambda: (
                list(Job.objects.filter(pk__in=ids).values_list("state", flat=True))
                == ["running"] * 3
            ),
            120,
            "the three jobs to run side by side",
            interval=1,
        )
        jobs = Job.objects.filter(pk__in=ids)
        assert [j.state for j in jobs] == ["running"] * 3, [(j.state, j.message) for j in jobs]
        assert {(j.image.slug, j.partition.name, j.gpus, j.cpus, j.memory_gb) for j in jobs} == {
            ("python-host", "gpu", 1, 2, 4)
        }
    finally:
        for job_id in ids:
            portal("cancel", str(job_id))


def test_a_python_jobs_output_is_in_the_log_while_it_runs(portal):
    """Batch jobs run Python unbuffered: the log tail follows a training as it prints."""
    code = "import time\nprint('epoch 1 loss 0.9')\ntime.sleep(120)\nprint('epoch 2')"
    submitted = portal("submit", "--partition", "cpu", "--", f"python3 -c {shlex.quote(code)}")
    job_id = submitted.stdout.strip()
    assert submitted.returncode == 0, submitted.stderr
    try:

        def printed() -> str | None:
            out = portal("logs", job_id).stdout
            return out if "epoch 1 loss 0.9" in out else None

        out = polling.until(printed, 90, "the first epoch in the log", interval=1)
        assert "epoch 1 loss 0.9" in out.splitlines(), out
        # Still in its sleep: the portal's own state may lag behind Slurm by a sync.
        assert "epoch 2" not in out
        assert Job.objects.get(pk=int(job_id)).state in ("pending", "running")
    finally:
        portal("cancel", job_id)
