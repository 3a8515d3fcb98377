"""Fault injection on the served stack: every job reaches its true final state.

The whole stack (gunicorn + uvicorn, Celery worker and beat, its own Redis) submits short
batch jobs through the public API to the dev cluster's real Slurm while its parts are
killed by PID and restarted: the Celery worker (kill -9, process group, right after bursts
of submissions), the web server, Redis (restarted empty three times under the running
worker, web server and beat, none of which may exit: every queued message is lost),
slurmctld and the dev sshd. Afterwards every portal job must be final, agree with what
Slurm itself says about it, and exist in Slurm at most once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from devtools import demo_catalog
from identity.tokens import ApiToken
from jobs.models import Job
from schedulers.slurm import parsers
from tests import polling
from tests.livestack import ROOT, LiveStack, Redis

# The file restarts slurmctld, sshd and the broker: it runs while no other Slurm test does (tests/conftest.py).
pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True), pytest.mark.alone]

STATE = Path(os.environ.get("PORTAL_DEVCLUSTER_DIR", "/var/lib/portal-devcluster"))


class Api:
    def __init__(self, url: str, token: str):
        self.url, self.token = url, token
        self.unavailable = 0  # 503 answers seen while Redis was away

    def call(self, method: str, path: str, body: dict | None = None, deadline: float = 60):
        """One API call, repeated while the server is away or answers 503 (nothing changed
        then). Returns (status, body)."""

        def attempt() -> tuple[int, object] | None:
            request = urllib.request.Request(
                self.url + path,
                data=None if body is None else json.dumps(body).encode(),
                method=method,
                headers={
                    "Authorization": f"Bearer {self.token}",
                    "Content-Type": "application/json",
                },
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return response.status, json.loads(response.read() or b"null")
            except urllib.error.HTTPError as exc:
                if exc.code != 503:
                    return exc.code, json.loads(exc.read() or b"null")
                assert exc.headers["Retry-After"], "a 503 says when to come back"
                self.unavailable += 1
            except (ConnectionError, urllib.error.URLError):
                pass  # the web server is restarting: nothing reached it
            return None

        return polling.until(attempt, deadline, f"{method} {path} to get through")

    def submit(self, command: str) -> int:
        status, body = self.call(
            "POST",
            "/api/v1/jobs/",
            {
                "container": "shell-host",
                "kind": "batch",
                "partition": "cpu",
                "gpus": 0,
                "gpu_type": "",
                "cpus": 1,
                "memory_gb": 1,
                "time_limit": 5,
                "command": command,
            },
        )
        assert status == 201, body
        return body["id"]


def restart_daemon(pid_file: Path) -> None:
    """Stop one of the dev cluster's daemons by its PID; `make devcluster`'s script starts it."""
    pid = int(pid_file.read_text())
    os.kill(pid, signal.SIGTERM)

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    with contextlib.suppress(AssertionError):  # still there: up.sh finds it running
        polling.until(gone, 10, f"process {pid} to end", interval=0.1)


def devcluster_up() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "deploy/devcluster/up.sh")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def slurm_jobs_by_name() -> dict[str, list[parsers.SlurmJob]]:
    """Every job the controller holds, by name (root sees every user's)."""
    out = subprocess.run(["squeue", "--json"], capture_output=True, text=True, check=True).stdout
    found: dict[str, list[parsers.SlurmJob]] = {}
    for user in ("hpcuser", "hpcuser2"):
        for status in parsers.parse_squeue_json(out, user):
            found.setdefault(status.name, []).append(status)
    return found


def test_every_job_reaches_its_true_final_state_under_faults(devcluster, owner, tmp_path):
    broker = Redis(tmp_path)
    broker.start()
    stack = LiveStack(
        tmp_path,
        env={
            "REDIS_URL": broker.url,
            "PORTAL_CACHE_PREFIX": "faults",
            "PORTAL_RECOVER_AFTER": "4",
            "PORTAL_TASK_TIME_LIMIT": "30",
            "PORTAL_SSH_COMMAND_TIMEOUT": "10",
            "PORTAL_SSH_CONNECT_TIMEOUT": "5",
            "PORTAL_RETRY_BACKOFF_MAX": "4",
            "PORTAL_SUBMIT_MAX_RETRIES": "20",
        },
    )
    demo_catalog.load()
    _, token = ApiToken.issue(owner, "faults")
    ids: list[int] = []
    cancelled: list[int] = []
    try:
        stack.start()
        api = Api(stack.url, token)
        command = "sleep 2; echo ok"

        # 1. A burst, and the worker killed while it submits (its reserved messages are lost
        #    to it; its claims stay behind).
        ids += [api.submit(command) for _ in range(8)]
        time.sleep(0.3)
        stack.kill("worker")
        ids += [api.submit(command) for _ in range(4)]  # queued while no worker runs
        time.sleep(1)
        stack.restart("worker")

        # 2. The web server restarts between bursts.
        ids += [api.submit(command) for _ in range(4)]
        stack.restart("web")
        ids += [api.submit(command) for _ in range(4)]

        # 3. Redis dies and comes back empty, three times, under the running worker, web
        #    server and beat (none of them is restarted): whatever was queued is gone.
        outage = urllib.request.Request(
            f"{stack.url}/api/v1/jobs/", headers={"Authorization": f"Bearer {token}"}
        )
        for _ in range(3):
            ids += [api.submit(command) for _ in range(3)]
            broker.kill()
            time.sleep(1)
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(outage, timeout=30)
            assert refused.value.code == 503  # never a 500: come back later
            broker.start()
            ids += [api.submit(command) for _ in range(2)]
        assert not stack.exited(), f"a portal process ended with Redis\n{stack.logs()}"

        # 4. Cancels, then slurmctld and the dev sshd restart under them.
        ids += [api.submit("sleep 30") for _ in range(4)]
        time.sleep(3)
        for job_id in ids[-4:-1]:
            status, body = api.call("POST", f"/api/v1/jobs/{job_id}/cancel/")
            assert status in (200, 202), body
            cancelled.append(job_id)
        restart_daemon(STATE / "run" / "slurmctld.pid")
        restart_daemon(STATE / "run" / "sshd.pid")
        # (the first user's sessions only: "hpcuser2", the file tests' user, is another)
        subprocess.run(["pkill", "-f", "^sshd: hpcuser[@ ]"], capture_output=True)
        time.sleep(2)
        devcluster_up()

        # Every job must end, within a bound.
        active = Job.objects.filter(pk__in=ids).exclude(state__in=Job.FINAL_STATES)

        def stuck() -> str:
            jobs = {j.pk: (j.state, j.message) for j in active}
            return f"every job to end (not final: {jobs})\n{stack.logs()}"

        polling.until(lambda: not active.exists(), 240, stuck, interval=2)
        # Only the processes the test killed itself were started again.
        assert not stack.exited(), f"a portal process ended\n{stack.logs()}"
    finally:
        stack.stop()
        broker.kill()

    slurm = slurm_jobs_by_name()
    wrong = {}
    for job in Job.objects.filter(pk__in=ids):
        copies = slurm.get(job.scheduler_name, [])
        assert len(copies) <= 1, f"job {job.pk} is in Slurm {len(copies)} times"
        if not copies:
            # Never reached Slurm: only a cancel before submission may say so.
            if not (job.state == "cancelled" and job.pk in cancelled):
                wrong[job.pk] = (job.state, job.message, "not in Slurm")
            continue
        truth = copies[0]
        if job.scheduler_job_id != truth.scheduler_id or job.state != truth.state:
            wrong[job.pk] = (job.state, job.scheduler_job_id, truth.slurm_state, truth.scheduler_id)
        elif job.state == "completed" and job.exit_code != 0:
            wrong[job.pk] = (job.state, job.exit_code)
    assert not wrong, f"portal and Slurm disagree: {wrong}"
    states = sorted(Job.objects.filter(pk__in=ids).values_list("state", flat=True))
    assert states.count("completed") >= len(ids) - len(cancelled), states
    print(
        f"\n{len(ids)} jobs: {states.count('completed')} completed, "
        f"{states.count('cancelled')} cancelled; 503 answers while Redis was away: "
        f"{api.unavailable}"
    )
