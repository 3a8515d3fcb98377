"""No job holds a worker beyond a bound: a login environment that hangs the provenance read
(a ~/.bashrc that sleeps for 400 s when it sees the script) ends that person's jobs
submit_failed within the task's deadline, while another person's job, submitted meanwhile
to the same two worker processes, reaches Slurm in its usual time. A real Celery worker,
real sshd and Slurm; the task limit shortened to 60 s (soft 45 s, provenance read 13.5 s)."""

import re
import subprocess
import time

import pytest

from clusters import deadline, pool, ssh
from clusters.models import ClusterAccount
from devtools import devcluster as devcluster_mod
from jobs import tasks
from jobs.models import Job
from tests import factories
from tests.devcluster.helpers import hanging_login
from tests.livestack import LiveStack

# The file rewrites hpcuser2's ~/.bashrc: it runs while no other Slurm test does (tests/conftest.py).
pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True), pytest.mark.alone]

TIME_LIMIT = 60  # soft limit 45 s, deadline 40.5 s, provenance read a third: 13.5 s
# A message carries its sender's limits (the web process's, from the same settings as the
# worker's); this test process sends with the worker's.
LIMITS = {"time_limit": TIME_LIMIT, "soft_time_limit": TIME_LIMIT - 15}


@pytest.fixture
def hostile_bashrc():
    """hpcuser2's ~/.bashrc sleeps for 400 s when the command it runs for is the provenance
    script (its command line names ``portal-provenance``)."""
    with hanging_login("hpcuser2", ["*portal-provenance*"], 400) as over:
        yield over


def in_squeue(name: str) -> bool:
    out = subprocess.run(
        ["squeue", "-h", "-n", name, "-o", "%j"], capture_output=True, text=True, timeout=30
    ).stdout
    return name in out.split()


def seconds_to_squeue(name: str, since: float, within: float) -> float | None:
    """Seconds from ``since`` (monotonic) until the job ``name`` is in squeue; None when
    it is not within ``within`` seconds."""
    while time.monotonic() - since < within:
        if in_squeue(name):
            return time.monotonic() - since
        time.sleep(0.5)
    return None


def test_a_hostile_login_environment_ends_its_jobs_and_holds_no_one_elses(
    devcluster, devcluster_info, owner, outsider, hostile_bashrc, tmp_path
):
    devcluster_mod.register(
        devcluster_info, {owner.username: devcluster_info["default_user"], "outsider": "hpcuser2"}
    )
    stack = LiveStack(tmp_path, env={"PORTAL_TASK_TIME_LIMIT": str(TIME_LIMIT)})
    stack.start_worker()  # two processes, as `make demo` runs it
    image = factories.image("host-bounds")
    try:
        hostile = [
            factories.job(outsider, devcluster, "echo hostile", image=image) for _ in range(2)
        ]
        started = time.monotonic()
        for job in hostile:  # both worker processes take one
            tasks.submit_job.apply_async((job.pk,), queue=stack.queue, **LIMITS)
        time.sleep(2)
        demo = factories.job(owner, devcluster, "sleep 60", image=image)
        submitted = time.monotonic()
        tasks.submit_job.apply_async((demo.pk,), queue=stack.queue, **LIMITS)

        reached = seconds_to_squeue(demo.scheduler_name, submitted, 30)
        assert reached is not None, f"demo's job not in squeue after 30 s\n{stack.logs()}"

        bound = TIME_LIMIT - 15  # the soft limit
        while time.monotonic() - started < bound + 5:
            ended = Job.objects.filter(pk__in=[j.pk for j in hostile], state="submit_failed")
            if ended.count() == 2:
                break
            time.sleep(0.5)
        took = time.monotonic() - started
        for job in hostile:
            job.refresh_from_db()
            assert job.state == "submit_failed", (job.state, job.message, stack.logs())
            assert re.match(r"The cluster took longer than 1[34] s to read what", job.message)
            assert "~/.bashrc" in job.message and job.scheduler_job_id == ""
        assert took < bound, took
        print(f"\nhostile jobs ended in {took:.1f} s; demo's job in squeue after {reached:.1f} s")
    finally:
        stack.stop()


def test_a_command_and_an_sftp_read_end_by_the_deadline(devcluster, owner):
    """Real sshd: a command that would run 30 s, and an SFTP read of a FIFO nobody writes,
    each end when the deadline in force comes (2 s), not at the 60 s command timeout, and
    the command is not run again on a new connection."""
    account = ClusterAccount.for_user(devcluster, owner)
    assert account is not None
    conn = pool.get(account)
    before = conn.commands_run
    started = time.monotonic()
    with deadline.within(2), pytest.raises(ssh.CommandTimedOut) as cut:
        pool.with_connection(account, lambda c: c.run(["sleep", "30"]))
    assert 1.5 < time.monotonic() - started < 5 and cut.value.seconds <= 2
    assert pool.get(account).commands_run == before + 1  # not run again
    fifo = f".portal-fifo-{time.monotonic_ns()}"
    conn.run(["mkfifo", fifo])
    try:
        started = time.monotonic()
        with deadline.within(2), pytest.raises(ssh.ClusterUnreachable):
            with conn.sftp_session() as sftp, sftp.open(fifo) as f:
                f.read(10)
        assert time.monotonic() - started < 5
    finally:
        # A writer's open releases the SFTP server still blocked opening the FIFO (Debian's
        # sftp-server is a process of the person's: unlinking alone would leave it there).
        pool.get(account).run(["sh", "-c", 'exec 3<>"$1"; rm -f -- "$1"', "sh", fifo])


def test_ten_hanging_submissions_at_demos_own_limits_hold_one_worker(
    devcluster, devcluster_info, owner, outsider, hostile_bashrc, tmp_path
):
    """make demo's own settings (two worker processes, the default task limit of 180 s,
    its provenance read ~50 s): hpcuser2 sends 10 submissions whose login environment
    hangs. At most PORTAL_PERSON_TASKS of them run at once (jobs/task_helpers.PersonTask);
    demo's job, sent after them, reaches squeue within 30 s. Before: hpcuser2's first two
    held both processes for the provenance read's whole bound, and demo's job waited
    behind all ten."""
    from django.conf import settings

    devcluster_mod.register(
        devcluster_info, {owner.username: devcluster_info["default_user"], "outsider": "hpcuser2"}
    )
    assert settings.PORTAL_TASK_TIME_LIMIT == 180 and settings.PORTAL_PERSON_TASKS == 1
    stack = LiveStack(tmp_path)
    stack.start_worker()  # two processes, as `make demo` runs it
    image = factories.image("host-bounds")
    try:
        hostile = [
            factories.job(outsider, devcluster, "echo hostile", image=image) for _ in range(10)
        ]
        for job in hostile:
            tasks.submit_job.apply_async((job.pk,), queue=stack.queue)
        time.sleep(2)
        demo = factories.job(owner, devcluster, "sleep 60", image=image)
        submitted = time.monotonic()
        tasks.submit_job.apply_async((demo.pk,), queue=stack.queue)
        reached = seconds_to_squeue(demo.scheduler_name, submitted, 30)
        assert reached is not None, f"demo's job not in squeue after 30 s\n{stack.logs()}"
        submitting = Job.objects.filter(
            pk__in=[j.pk for j in hostile], submit_claimed_at__isnull=False
        ).exclude(state__in=["submit_failed", "pending", "running", "completed"])
        assert submitting.count() <= settings.PORTAL_PERSON_TASKS
        print(f"\ndemo's job in squeue after {reached:.1f} s behind 10 hanging submissions")
    finally:
        stack.stop()
