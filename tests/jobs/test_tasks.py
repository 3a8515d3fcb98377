"""Task behaviour with the SSH boundary replaced by a fake (the real path is in tests/devcluster)."""

import json
from datetime import timedelta

import pytest
from django.test import override_settings

from clusters import pool, ssh
from clusters.models import ClusterAccount
from identity.audit.models import AuditEvent
from jobs import tasks
from jobs.models import Job
from schedulers.seam import Submission
from schedulers.slurm import operations, parsers
from tests import factories

pytestmark = pytest.mark.django_db


class FakeConnection:
    """Answers commands by their first word; a value may be an exception to raise, or a
    function of the command line."""

    def __init__(self, answers: dict):
        self.answers = answers
        self.commands: list[list[str]] = []

    def run(self, argv, *, stdin=None, timeout=None, check=True, max_bytes=None):
        self.commands.append(list(argv))
        answer = self.answers.get(argv[0])
        if isinstance(answer, list):
            answer = answer.pop(0)
        if callable(answer):  # an answer by the whole command line
            answer = answer(argv)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, ssh.Result):
            return answer
        return ssh.Result(answer or "", "", 0)


@pytest.fixture
def fake(monkeypatch):
    conn = FakeConnection({})
    monkeypatch.setattr(pool, "with_connection", lambda account, op, **_: op(conn))
    return conn


@pytest.fixture
def job(owner, cluster, image):
    factories.account(cluster, owner, "alice")
    return factories.job(
        owner,
        cluster,
        "true",
        partition="gpu",
        image=image,
        memory_gb=4,
        time_limit_minutes=60,
    )


def test_transient_failure_is_retried_then_submits(fake, job):
    fake.answers["bash"] = [ssh.ClusterUnreachable("connection reset"), "submitted 77\n"]
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert (job.state, job.scheduler_job_id) == ("pending", "77")
    # Two submit steps (each after the read of what reproduces the run, jobs/provenance.py).
    assert [c[0] for c in fake.commands] == ["timeout", "bash", "timeout", "bash"]


@override_settings(PORTAL_SUBMIT_MAX_RETRIES=2)
def test_cluster_unreachable_after_all_retries_ends_submit_failed(fake, job):
    fake.answers["bash"] = [ssh.ClusterUnreachable("No route to host")] * 3
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == "submit_failed"
    assert job.message == "The cluster could not be reached: No route to host"


def test_busy_controller_is_transient_but_a_bad_request_is_not(fake, job):
    busy = ssh.CommandFailed(
        "x", stderr="sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying"
    )
    fake.answers["bash"] = [busy, "submitted 78\n"]
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == "pending"


def test_permanent_refusal_keeps_the_schedulers_message(fake, job):
    refused = ssh.CommandFailed(
        "sbatch: error: invalid account or account/partition combination specified",
        stderr="sbatch: error: invalid account or account/partition combination specified",
    )
    fake.answers["bash"] = refused
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == "submit_failed" and "invalid account" in job.message


def test_user_without_cluster_account_gets_a_clear_message(fake, outsider, cluster, image):
    job = factories.job(
        outsider,
        cluster,
        "true",
        partition=None,
        image=image,
        memory_gb=4,
        time_limit_minutes=60,
    )
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == "submit_failed" and "no account on cluster testcluster" in job.message
    assert fake.commands == []


def test_submit_claimed_by_another_worker_does_nothing(fake, job):
    assert job.claim_submit()
    tasks.submit_job.apply(args=[job.pk])
    assert fake.commands == []


def test_job_cancelled_while_being_submitted_is_scancelled(fake, job, monkeypatch):
    def submit_then_user_cancels(conn, work_dir, name, script, secret="", metrics_token=""):
        Job.objects.filter(pk=job.pk).update(state="cancelled")
        return Submission("91", adopted=False)

    monkeypatch.setattr(operations, "submit", submit_then_user_cancels)
    tasks.submit_job.apply(args=[job.pk])
    assert ["scancel", f"--name={job.scheduler_name}", "91"] in fake.commands


def test_a_lost_scancel_of_a_job_cancelled_while_submitted_keeps_its_id_and_goes_again(
    fake, job, monkeypatch
):
    def submit_then_user_cancels(conn, work_dir, name, script, secret="", metrics_token=""):
        Job.objects.filter(pk=job.pk).update(state="cancelled")
        return Submission("92", adopted=False)

    monkeypatch.setattr(operations, "submit", submit_then_user_cancels)
    # The scancel's answer is lost (sshd or slurmctld restarting under it).
    fake.answers["scancel"] = ssh.ClusterUnreachable("connection reset")
    again = []
    monkeypatch.setattr(
        tasks.cancel_submitted, "apply_async", lambda args, **kw: again.append(args)
    )
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert (job.state, job.scheduler_job_id) == ("cancelled", "92")
    assert again == [(job.pk,)]
    fake.commands.clear()
    del fake.answers["scancel"]
    tasks.cancel_submitted.apply(args=again[0])
    assert fake.commands == [["scancel", f"--name={job.scheduler_name}", "92"]]


def test_a_cancel_after_a_submit_that_never_answered_withdraws_the_job_by_name(fake, job):
    job.mark_submit_sent()  # a try sent it; its answer was lost, its retry is queued
    assert job.request_cancel() is False
    (event,) = job.events.filter(to_state="cancelled")
    assert "withdraw" in event.due
    tasks.withdraw_job.apply(args=[job.pk], kwargs={"outbox_event": event.pk})
    assert fake.commands == [["scancel", f"--name={job.scheduler_name}", "--user=alice"]]
    event.refresh_from_db()
    assert "withdraw" not in event.due
    assert AuditEvent.objects.filter(action="cancel", target__contains="withdrawn").exists()
    fake.commands.clear()
    tasks.submit_job.apply(args=[job.pk])  # the lost try's retry sends nothing
    assert fake.commands == []


def test_a_submit_that_runs_out_of_time_after_sending_withdraws_the_job(fake, job):
    from celery.exceptions import SoftTimeLimitExceeded

    fake.answers["bash"] = SoftTimeLimitExceeded()
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == "submit_failed"
    (event,) = job.events.filter(to_state="submit_failed")
    assert "withdraw" in event.due
    fake.commands.clear()
    tasks.withdraw_job.apply(args=[job.pk])
    assert fake.commands == [["scancel", f"--name={job.scheduler_name}", "--user=alice"]]


def test_a_withdrawal_waits_while_the_arrays_other_members_are_still_queued(fake, owner, cluster):
    from jobs.models import JobArray

    factories.account(cluster, owner, "alice")
    array = JobArray.objects.create(owner=owner, cluster=cluster)
    first, second = (
        factories.job(owner, cluster, state="queued", array=array, array_index=i) for i in (0, 1)
    )
    array.mark_submit_sent()
    first.request_cancel()
    tasks.withdraw_job.apply(args=[first.pk])
    assert fake.commands == []  # the array's own retry cancels the member by its id
    second.request_cancel()
    tasks.withdraw_job.apply(args=[second.pk])
    assert fake.commands == [["scancel", f"--name={array.scheduler_name}", "--user=alice"]]


def test_a_withdrawal_of_a_job_the_portal_knows_the_id_of_does_nothing(fake, job):
    job.mark_submit_sent()
    Job.objects.filter(pk=job.pk).update(state="cancelled", scheduler_job_id="91")
    tasks.withdraw_job.apply(args=[job.pk])
    assert fake.commands == []


def pending(job, sid="55"):
    account = ClusterAccount.objects.get(user=job.owner)
    Job.objects.filter(pk=job.pk).update(
        state="running", scheduler_job_id=sid, cluster_account=account
    )
    return Job.objects.filter(pk=job.pk)


def test_scheduler_errors_during_sync_change_nothing(fake, job):
    fake.answers["squeue"] = ssh.CommandFailed(
        "x", stderr="squeue: error: Unable to contact slurm controller"
    )
    assert tasks.sync_jobs(pending(job)) == 0
    assert Job.objects.get(pk=job.pk).state == "running"


NO_JOBS = '{"jobs": []}'


def test_job_unknown_to_every_source_is_left_alone_for_the_grace_period(fake, job):
    fake.answers.update(squeue=NO_JOBS, sacct=NO_JOBS)
    with override_settings(PORTAL_LOST_JOB_GRACE=600):
        assert tasks.sync_jobs(pending(job)) == 0
        assert tasks.sync_jobs(pending(job)) == 0
    assert Job.objects.get(pk=job.pk).state == "running"


def test_job_unknown_to_every_source_after_the_grace_period_fails_with_a_message(fake, job):
    fake.answers.update(squeue=NO_JOBS, sacct=NO_JOBS)
    with override_settings(PORTAL_LOST_JOB_GRACE=0):
        assert tasks.sync_jobs(pending(job)) == 0  # first unseen: noted
        assert tasks.sync_jobs(pending(job)) == 1
    job.refresh_from_db()
    assert job.state == "failed" and "no longer knows this job" in job.message


def test_a_job_seen_again_starts_its_grace_period_over(fake, job):
    fake.answers.update(squeue=NO_JOBS, sacct=NO_JOBS)
    tasks.sync_jobs(pending(job))
    assert Job.objects.get(pk=job.pk).scheduler_unseen_since is not None
    seen = {"job_id": 55, "user_name": "alice", "name": job.scheduler_name, "job_state": "RUNNING"}
    fake.answers.update(squeue=json.dumps({"jobs": [seen]}))
    tasks.sync_jobs(pending(job))
    assert Job.objects.get(pk=job.pk).scheduler_unseen_since is None


def test_a_reissued_id_under_another_name_is_not_this_job(fake, job):
    other = {"job_id": 55, "user_name": "alice", "name": "someone-else", "job_state": "COMPLETED"}
    fake.answers.update(squeue=json.dumps({"jobs": [other]}), sacct=NO_JOBS)
    tasks.sync_jobs(pending(job))
    assert Job.objects.get(pk=job.pk).state == "running"


def test_one_account_failing_does_not_stop_the_sync_of_another(fake, job, monkeypatch):
    calls = []

    def query_owners(conn, expected):
        calls.extend(expected)
        raise RuntimeError("odd output")

    monkeypatch.setattr(operations, "query_owners", query_owners)
    other = Job.objects.get(pk=job.pk)
    other.pk, other.uid = None, "other"
    other.save()
    bob = ClusterAccount.objects.get(user=job.owner)
    bob.pk, bob.user, bob.username = (
        None,
        factories.user("b2"),
        "bob",
    )
    bob.save()
    Job.objects.filter(pk=other.pk).update(
        owner=bob.user, state="running", scheduler_job_id="56", cluster_account=bob
    )
    tasks.sync_jobs(Job.objects.filter(pk__in=[pending(job).get().pk, other.pk]))
    assert sorted(calls) == ["alice", "bob"]


def test_sync_clusters_spreads_polls_over_the_interval(monkeypatch, job):
    pending(job)
    calls = []
    monkeypatch.setattr(
        tasks.sync_cluster, "apply_async", lambda args, countdown: calls.append(countdown)
    )
    with override_settings(PORTAL_SYNC_INTERVAL=20, PORTAL_SYNC_JITTER=0.5):
        for _ in range(20):
            tasks.sync_clusters()
    assert len(calls) == 20 and all(0 <= c <= 10 for c in calls)
    assert len({round(c, 3) for c in calls}) > 1  # not all at once


def test_final_metrics_read_waits_for_a_read_in_progress_instead_of_being_dropped(job, monkeypatch):
    from django.core.cache import cache

    from tracking import tasks as metrics_tasks

    reads, retries = [], []
    monkeypatch.setattr(metrics_tasks, "tail_job", lambda j, max_passes: reads.append(max_passes))
    monkeypatch.setattr(
        metrics_tasks.tail_metrics,
        "retry",
        lambda countdown: retries.append(countdown) or RuntimeError(),
    )
    cache.add(f"metrics-tail:{job.pk}", 1, timeout=60)  # another worker is reading
    try:
        metrics_tasks.tail_metrics.run(job.pk)  # a periodic read: skipped
        assert retries == [] and reads == []
        with pytest.raises(RuntimeError):
            metrics_tasks.tail_metrics.run(job.pk, final=True)  # the final read: retried later
        assert retries == [5] and reads == []
    finally:
        cache.delete(f"metrics-tail:{job.pk}")
    metrics_tasks.tail_metrics.run(job.pk, final=True)
    assert reads == [50]


def test_recovery_sweep_queues_lost_submissions_and_cancellations(job, monkeypatch, settings):
    from datetime import timedelta

    from django.utils import timezone

    sent = []
    monkeypatch.setattr(tasks.submit_job, "delay", lambda pk: sent.append(("submit", pk)))
    monkeypatch.setattr(tasks.cancel_job, "delay", lambda pk, *by: sent.append(("cancel", pk)))
    settings.PORTAL_RECOVER_AFTER = 60
    assert tasks.recover_jobs() == {
        "submits": 0,
        "cancels": 0,
        "given_up": 0,
    }  # too young to be lost
    old = timezone.now() - timedelta(minutes=5)
    Job.objects.filter(pk=job.pk).update(created_at=old, submit_claimed_at=timezone.now())
    assert tasks.recover_jobs()["submits"] == 0  # a live worker holds the claim
    dead = timezone.now() - timedelta(seconds=settings.PORTAL_TASK_TIME_LIMIT + 60)
    Job.objects.filter(pk=job.pk).update(submit_claimed_at=dead)
    assert tasks.recover_jobs()["submits"] == 1  # its worker was killed: queued again
    Job.objects.filter(pk=job.pk).update(
        state="running", scheduler_job_id="55", cancel_requested_at=old
    )
    assert tasks.recover_jobs() == {"submits": 0, "cancels": 1, "given_up": 0}
    assert sent == [("submit", job.pk), ("cancel", job.pk)]


def test_a_cancel_that_meets_an_unreachable_controller_is_retried(fake, job):
    fake.answers["scancel"] = ssh.Result(
        "", "scancel: error: Kill job error on job id 55: Unable to contact slurm controller", 1
    )
    with pytest.raises(operations.SchedulerUnavailable):
        operations.cancel(fake, "55", job.scheduler_name)


def test_a_status_the_adapter_cannot_read_leaves_that_job_alone_and_syncs_the_others(
    job, monkeypatch
):
    # The parsers already skip unknown states; this is the adapter's own guard behind them.
    other = Job.objects.get(pk=job.pk)
    other.pk, other.uid = None, "other"
    other.save()
    account = ClusterAccount.objects.get(user=job.owner)
    Job.objects.filter(pk=other.pk).update(
        state="running", scheduler_job_id="56", cluster_account=account
    )
    states = {"55": "EXPLODED", "56": "COMPLETED"}
    monkeypatch.setattr(
        operations,
        "query_owners",
        lambda conn, expected: {
            owner: {
                key: parsers.SlurmJob(key.scheduler_id, states[key.scheduler_id], name=key.name)
                for key in jobs
            }
            for owner, jobs in expected.items()
        },
    )
    monkeypatch.setattr(pool, "with_connection", lambda account, op, **_: op(None))
    tasks.sync_jobs(Job.objects.filter(pk__in=[pending(job).get().pk, other.pk]))
    assert Job.objects.get(pk=job.pk).state == "running"  # as it was
    assert Job.objects.get(pk=other.pk).state == "completed"


def test_a_requeue_seen_only_after_the_job_runs_again_is_still_in_its_timeline(fake, job):
    # Requeued and running again between two syncs: the state is the same, the attempt not.
    again = {
        "job_id": 55,
        "user_name": "alice",
        "name": job.scheduler_name,
        "job_state": "RUNNING",
        "restart_cnt": 1,
        "nodes": "vm",
    }
    fake.answers.update(squeue=json.dumps({"jobs": [again]}))
    assert tasks.sync_jobs(pending(job)) == 1
    job.refresh_from_db()
    assert (job.state, job.attempt) == ("running", 1)
    last = job.events.last()
    assert (last.from_state, last.to_state) == ("running", "running")
    assert last.message == "Requeued by the scheduler: attempt 2."
    assert tasks.sync_jobs(pending(job)) == 0  # seen once, recorded once


def sacct_record(job: Job, name: str) -> dict:
    """One ``sacct --json -D -X`` record of ``job``'s run, named ``name``."""
    return {
        "job_id": int(job.scheduler_job_id),
        "user": job.cluster_account.username,
        "name": name,
        "state": {"current": "COMPLETED"},
        "nodes": "node1",
        "time": {"submission": 100, "start": 110, "end": 170, "elapsed": 60},
        "tres": {"allocated": [{"type": "cpu", "count": 2}]},
        "account": "",
    }


def test_runs_the_reader_missed_are_read_again_when_their_owner_cannot_log_in(
    monkeypatch, owner, cluster
):
    """The reader finds one of two ended jobs (accounting names the other "allocation" for
    a moment after it ends); its owner has no key to be asked with. The run found is
    recorded, the task does not fail, and it reads again (a retry) for the one missing."""
    cluster.sync_reads_all_jobs = True
    cluster.save()
    factories.account(cluster, None, "portal-reader")
    alice = factories.account(cluster, owner, "alice")  # no key
    found, missed = (
        factories.job(
            owner, cluster, "true", cluster_account=alice, scheduler_job_id=i, state="completed"
        )
        for i in ("71", "72")
    )
    answer = json.dumps(
        {"jobs": [sacct_record(found, found.scheduler_name), sacct_record(missed, "allocation")]}
    )
    reader = FakeConnection({"sacct": answer})
    asked = []

    def with_connection(account, op):
        asked.append(account.username)
        if account.user_id is None:
            return op(reader)
        return op(ssh.connect_account(account))  # what the pool would do: no key

    monkeypatch.setattr(pool, "with_connection", with_connection)
    result = tasks.record_attempts.apply(args=[[found.pk, missed.pk]])
    assert result.successful(), result.traceback
    (run,) = found.attempts.all()
    assert (run.elapsed_seconds, run.cpus, run.node) == (60, 2, "node1")
    assert not missed.attempts.exists()
    # Each pass: the reader, then the owner (refused); a pass per retry, then it gives up.
    retries = tasks.record_attempts.max_retries
    assert asked == ["portal-reader", "alice"] * (retries + 1)


# -- no job holds a worker beyond a bound ------------------------------------------------


def test_a_provenance_read_that_runs_out_of_time_ends_the_job_at_once(fake, job):
    """A login environment that holds the provenance read up (a ~/.bashrc that sleeps) ends
    the job submit_failed with a message: not retried, nothing submitted."""
    fake.answers["timeout"] = ssh.CommandTimedOut("timed out", seconds=49)
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == "submit_failed"
    assert job.message.startswith("The cluster took longer than ")
    assert "to read what reproduces the job" in job.message and "~/.bashrc" in job.message
    assert [c[0] for c in fake.commands] == ["timeout"]  # one try, no sbatch
    assert job.submit_tries == 1


def test_the_provenance_read_has_a_share_of_the_tasks_soft_limit(fake, job, monkeypatch):
    """Inside submit_job its deadline is a third of what the task's soft limit leaves,
    here (the command's timeout) and on the cluster (coreutils ``timeout -s KILL``)."""
    timeouts: list[float] = []
    run = fake.run

    def recording(argv, **kwargs):
        if argv[0] == "timeout":
            timeouts.append(kwargs["timeout"])
        return run(argv, **kwargs)

    monkeypatch.setattr(fake, "run", recording)
    fake.answers["bash"] = "submitted 80\n"
    monkeypatch.setattr(tasks.submit_job, "soft_time_limit", 30)
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == "pending"
    assert len(timeouts) == 1 and 7 < timeouts[0] <= 9  # (30 - 3) / 3
    argv = fake.commands[0]
    assert argv[:3] == ["timeout", "-s", "KILL"] and int(argv[3]) <= timeouts[0]


def test_a_submit_that_reaches_its_soft_time_limit_ends_the_job_with_a_message(fake, job):
    from celery.exceptions import SoftTimeLimitExceeded

    fake.answers["bash"] = SoftTimeLimitExceeded()
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == "submit_failed"
    soft = tasks.submit_job.soft_time_limit
    assert job.message.startswith(f"The cluster took longer than {soft:.0f} s to take the job")


def test_a_cancel_that_reaches_its_soft_time_limit_says_so_on_the_job(fake, job):
    from celery.exceptions import SoftTimeLimitExceeded

    Job.objects.filter(pk=job.pk).update(
        state="running", scheduler_job_id="56", cluster_account=ClusterAccount.objects.get()
    )
    fake.answers["scancel"] = SoftTimeLimitExceeded()
    tasks.cancel_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == "running" and "Cancelling failed: the cluster took longer" in job.message


def test_a_retry_of_its_own_hands_the_submit_try_back(fake, job):
    fake.answers["bash"] = [ssh.ClusterUnreachable("connection reset"), "submitted 79\n"]
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == "pending" and job.submit_tries == 1


def test_recovery_gives_up_a_submission_no_try_finished(job, monkeypatch, settings):
    """Each claim a worker took and never let go (killed at the hard limit, lost) is a try;
    after PORTAL_SUBMIT_MAX_TRIES the sweep ends the job with a message, and queues it no
    more."""
    from datetime import timedelta

    from django.utils import timezone

    sent = []
    monkeypatch.setattr(tasks.submit_job, "delay", lambda pk: sent.append(pk))
    settings.PORTAL_RECOVER_AFTER = 60
    settings.PORTAL_SUBMIT_MAX_TRIES = 3
    dead = timezone.now() - timedelta(seconds=settings.PORTAL_TASK_TIME_LIMIT + 60)
    Job.objects.filter(pk=job.pk).update(created_at=dead)
    for tries in (1, 2):
        assert job.claim_submit()  # a worker takes it and is killed
        Job.objects.filter(pk=job.pk).update(submit_claimed_at=dead)
        assert tasks.recover_jobs() == {"submits": 1, "cancels": 0, "given_up": 0}
        assert sent == [job.pk] * tries
    assert job.claim_submit()
    Job.objects.filter(pk=job.pk).update(submit_claimed_at=dead)
    assert tasks.recover_jobs() == {"submits": 0, "cancels": 0, "given_up": 1}
    job.refresh_from_db()
    assert (job.state, job.submit_tries) == ("submit_failed", 3)
    assert "for submission 3 times and no try finished" in job.message
    assert len(sent) == 2


def test_a_command_that_ran_out_of_time_is_not_run_again_on_a_new_connection(job, monkeypatch):
    account = ClusterAccount.objects.get()
    opened: list[object] = []

    def get(acct):
        opened.append(acct)
        return object()

    monkeypatch.setattr(pool, "get", get)

    def slow(conn):
        raise ssh.CommandTimedOut("timed out", seconds=5)

    with pytest.raises(ssh.CommandTimedOut):
        pool.with_connection(account, slow)
    assert len(opened) == 1


def test_a_tasks_deadline_caps_every_ssh_timeout(job):
    """A task with a soft limit (task_helpers.limits(): BoundedTask) has a deadline a tenth
    short of it; the SSH layer cuts each command's timeout to what is left
    (clusters.deadline)."""
    from clusters import deadline
    from jobs.task_helpers import BoundedTask

    seen = []

    @tasks.shared_task(soft_time_limit=20, base=BoundedTask)
    def probe():
        seen.append((deadline.left(), deadline.cap(60)))

    probe.apply()
    left, capped = seen[0]
    assert left is not None and 16 < left <= 18 and capped == pytest.approx(left, abs=0.5)
    assert deadline.left() is None  # cleared after the task


def test_recovery_gives_up_an_arrays_members_by_the_arrays_tries(
    owner, cluster, image, monkeypatch, settings
):
    from datetime import timedelta

    from django.utils import timezone

    from jobs.models import JobArray

    factories.account(cluster, owner, "alice")
    array = JobArray.objects.create(owner=owner, cluster=cluster)
    members = [
        factories.job(owner, cluster, "true", image=image, array=array, array_index=i)
        for i in range(2)
    ]
    sent = []
    monkeypatch.setattr(tasks.submit_array, "delay", lambda pk: sent.append(pk))
    settings.PORTAL_SUBMIT_MAX_TRIES = 2
    dead = timezone.now() - timedelta(seconds=settings.PORTAL_TASK_TIME_LIMIT + 60)
    Job.objects.filter(array=array).update(created_at=dead)
    assert array.claim_submit()
    JobArray.objects.filter(pk=array.pk).update(submit_claimed_at=dead)  # its worker died
    assert array.claim_submit()
    # The second try's worker is alive: its members are left to it.
    assert tasks.recover_jobs()["given_up"] == 0
    JobArray.objects.filter(pk=array.pk).update(submit_claimed_at=dead)  # now it is gone
    sent.clear()
    assert tasks.recover_jobs() == {"submits": 0, "cancels": 0, "given_up": 2}
    assert sent == []
    for job in members:
        job.refresh_from_db()
        assert job.state == "submit_failed" and "2 times" in job.message


# -- one id, two portal jobs: a controller that lost a job reissued its id ---------------
#
# slurmctld killed right after job "lost" started forgets it; after its restart it gives
# the same id to the owner's next job, "taken". Each must get only the records under its
# own name: "taken" its true outcome, "lost" none (and after the grace, failed as lost),
# never the other's state, exit code or runs.


def reissued(job: Job, lost_first: bool = True) -> tuple[Job, Job]:
    """(lost, taken): ``job`` running as Slurm job 55, and another job of its owner that
    Slurm gave id 55 after losing ``job`` (its own name and comment, running as well).
    ``lost_first``: "lost" was created first (else "taken": the portal made it earlier
    and submitted it later); the sync reads them in the order they were created."""
    lost = pending(job).get()
    taken = Job.objects.get(pk=job.pk)
    taken.pk, taken.uid = None, "taken"
    taken.save()
    if not lost_first:
        Job.objects.filter(pk=lost.pk).update(created_at=taken.created_at + timedelta(seconds=1))
    return Job.objects.get(pk=lost.pk), Job.objects.get(pk=taken.pk)


def scheduled(*jobs: Job):
    """What the periodic sync passes: those of ``jobs`` still scheduled."""
    return Job.objects.filter(pk__in=[j.pk for j in jobs], state__in=tasks.SCHEDULED_STATES)


def squeue_entry(job: Job, state: str, **fields) -> dict:
    """``job`` as ``squeue --json`` (22.05) lists it."""
    return {
        "job_id": int(job.scheduler_job_id),
        "user_name": "alice",
        "name": job.scheduler_name,
        "comment": job.ref().comment,
        "job_state": state,
        "nodes": "node2",
        "start_time": 1_795_000_000,
        **fields,
    }


def sacct_entry(job: Job, state: str) -> dict:
    """``job`` as ``sacct --json -X`` (22.05) records it, ended."""
    return {
        "job_id": int(job.scheduler_job_id),
        "user": "alice",
        "name": job.scheduler_name,
        "comment": {"administrator": None, "job": None, "system": None},
        "state": {"current": state, "reason": "None"},
        "nodes": "node2",
        "time": {"submission": 1_795_000_000, "start": 1_795_000_010, "end": 1_795_000_070},
        "exit_code": {"status": "SUCCESS", "return_code": 0},
    }


def sacct_line(job: Job, state: str, exit_code: str) -> str:
    """``job``'s line of ``sacct -n -P -X -o SACCT_FIELDS``."""
    fields = [job.scheduler_job_id, "alice", state, exit_code, "None", "node2"]
    fields += ["2026-11-21T10:00:00", "2026-11-21T10:01:00", job.scheduler_name]
    return parsers.FIELD_SEP.join(fields) + "\n"


def assert_lost(job: Job) -> None:
    job.refresh_from_db()
    assert (job.state, job.exit_code) == ("failed", None), job.message
    assert "no longer knows this job" in job.message
    assert f"id 55 under its name {job.scheduler_name}" in job.message
    assert "given the id to another job" in job.message


@pytest.mark.parametrize("lost_first", [True, False])
@pytest.mark.parametrize("through_reader", [False, True])
def test_a_reissued_id_in_the_controllers_answer_is_only_its_own_jobs(
    fake, job, cluster, through_reader, lost_first
):
    """squeue lists id 55 once, under "taken"'s name, ended with exit 0: "taken" completes;
    "lost" never does, and fails as lost after the grace (read through the cluster's
    reader, or on the owner's own connection; whichever job the portal made first)."""
    if through_reader:
        cluster.sync_reads_all_jobs = True
        cluster.save()
        factories.account(cluster, None, "portal-reader")
    lost, taken = reissued(job, lost_first)
    done = squeue_entry(taken, "COMPLETED", exit_code=0, end_time=1_795_000_060)
    fake.answers.update(squeue=json.dumps({"jobs": [done]}), sacct=NO_JOBS)
    with override_settings(PORTAL_LOST_JOB_GRACE=0):
        assert tasks.sync_jobs(scheduled(lost, taken)) == 1  # taken; lost: first unseen
        lost.refresh_from_db()
        assert (lost.state, lost.exit_code) == ("running", None)
        assert lost.scheduler_unseen_since is not None
        assert tasks.sync_jobs(scheduled(lost, taken)) == 1  # lost, after the grace
    taken.refresh_from_db()
    assert (taken.state, taken.exit_code, taken.node) == ("completed", 0, "node2")
    assert_lost(lost)


@pytest.mark.parametrize("lost_first", [True, False])
@pytest.mark.parametrize("recorded", ["taken", "lost"])
def test_a_reissued_id_in_accounting_gives_its_state_and_exit_code_to_its_own_job(
    fake, job, recorded, lost_first
):
    """The controller holds neither; accounting (sacct answers an id with its newest job)
    has id 55 under one name: that job gets the state and its exit code from ``sacct -P``,
    the other nothing, and fails as lost after the grace."""
    lost, taken = reissued(job, lost_first)
    jobs = {"taken": taken, "lost": lost}
    mine = jobs.pop(recorded)
    (other,) = jobs.values()
    state, code = ("COMPLETED", "0:0") if recorded == "taken" else ("FAILED", "3:0")
    record = json.dumps({"jobs": [sacct_entry(mine, state)]})
    fake.answers.update(
        squeue=NO_JOBS,
        sacct=lambda argv: record if "--json" in argv else sacct_line(mine, state, code),
    )
    with override_settings(PORTAL_LOST_JOB_GRACE=0):
        tasks.sync_jobs(scheduled(lost, taken))
        other.refresh_from_db()
        assert (other.state, other.exit_code) == ("running", None)
        tasks.sync_jobs(scheduled(lost, taken))
    mine.refresh_from_db()
    want = ("completed", 0) if recorded == "taken" else ("failed", 3)
    assert (mine.state, mine.exit_code) == want, mine.message
    assert_lost(other)


@pytest.mark.parametrize("lost_first", [True, False])
def test_the_runs_of_a_reissued_id_are_each_recorded_for_their_own_job(fake, job, lost_first):
    """``sacct -D`` lists every job that held id 55: "lost"'s run (still RUNNING as far as
    accounting knows: the controller lost it) and "taken"'s. Each job gets its own run,
    and only it."""
    lost, taken = reissued(job, lost_first)
    Job.objects.filter(pk=taken.pk).update(state="completed")
    first = sacct_entry(lost, "RUNNING")
    first["time"] = {"submission": 1_795_000_000, "start": 1_795_000_010, "end": 0}
    first["nodes"] = "node1"
    second = sacct_entry(taken, "COMPLETED")
    second["time"] = {"submission": 1_795_000_100, "start": 1_795_000_110, "end": 1_795_000_170}
    second["time"]["elapsed"] = 60
    fake.answers.update(sacct=json.dumps({"jobs": [first, second]}))
    result = tasks.record_attempts.apply(args=[[lost.pk, taken.pk]])
    assert result.successful(), result.traceback
    (run,) = taken.attempts.all()
    assert (run.scheduler_state, run.node, run.elapsed_seconds) == ("COMPLETED", "node2", 60)
    (run,) = lost.attempts.all()
    assert (run.scheduler_state, run.node, run.ended_at) == ("RUNNING", "node1", None)


@pytest.mark.parametrize("lost_first", [True, False])
def test_a_job_whose_id_was_reissued_takes_none_of_the_other_jobs_runs(fake, job, lost_first):
    """Accounting never heard of "lost"'s run: only "taken"'s is under id 55."""
    lost, taken = reissued(job, lost_first)
    Job.objects.filter(pk__in=[lost.pk, taken.pk]).update(state="completed")
    fake.answers.update(sacct=json.dumps({"jobs": [sacct_entry(taken, "COMPLETED")]}))
    tasks.record_attempts.apply(args=[[taken.pk]])
    tasks.record_attempts.apply(args=[[lost.pk, taken.pk]])
    assert taken.attempts.count() == 1
    assert not lost.attempts.exists()


def test_a_reissued_htcondor_id_is_only_its_own_jobs(fake, owner):
    """The same on HTCondor (a schedd that lost its queue reissues cluster ids): the ad of
    40.0 names "taken", which completes; "lost" fails as lost after the grace."""
    pool_cluster = factories.cluster("pool", scheduler="htcondor")
    factories.partition(pool_cluster, "gpu", max_gpus_per_job=2)
    account = factories.account(pool_cluster, owner, "alice")
    lost, taken = (
        factories.job(
            owner,
            pool_cluster,
            "true",
            partition="gpu",
            cluster_account=account,
            scheduler_job_id="40.0",
            state="running",
        )
        for _ in range(2)
    )
    ad = {
        "ClusterId": 40,
        "ProcId": 0,
        "Owner": "alice",
        "PortalName": taken.scheduler_name,
        "JobStatus": 4,
        "ExitCode": 0,
        "JobStartDate": 1_795_000_010,
        "CompletionDate": 1_795_000_070,
        "LastRemoteHost": "slot1@node2",
    }
    fake.answers.update(condor_q=json.dumps([ad]), condor_history="[]")
    with override_settings(PORTAL_LOST_JOB_GRACE=0):
        tasks.sync_jobs(scheduled(lost, taken))
        lost.refresh_from_db()
        assert (lost.state, lost.exit_code) == ("running", None)
        tasks.sync_jobs(scheduled(lost, taken))
    taken.refresh_from_db()
    assert (taken.state, taken.exit_code) == ("completed", 0)
    lost.refresh_from_db()
    assert (lost.state, lost.exit_code) == ("failed", None)
    assert "no longer knows this job" in lost.message and "40.0" in lost.message


def test_a_worker_killed_while_recording_an_arrays_submission_leaves_it_to_the_next_try(
    fake, owner, cluster, image, monkeypatch
):
    """The array's submission and its members' are recorded together: a worker that dies
    half-way (here, at the second member) records none of it, so the next try adopts the
    array Slurm already has and every member becomes pending. Before, the array was marked
    submitted with its members still queued, and every later try returned at once."""
    from jobs.models import JobArray

    factories.account(cluster, owner, "alice")
    array = JobArray.objects.create(owner=owner, cluster=cluster)
    members = [
        factories.job(owner, cluster, "true", image=image, array=array, array_index=i)
        for i in range(3)
    ]
    fake.answers["bash"] = ["submitted 88\n", "existing 88\n"]
    real = Job.transition
    seen = []

    def dies_at_the_second(self, *args, **kwargs):
        seen.append(self.pk)
        if len(seen) == 2:
            raise SystemExit("the worker is killed")  # (not an Exception: nothing catches it)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Job, "transition", dies_at_the_second)
    with pytest.raises(SystemExit):
        tasks.submit_array.apply(args=[array.pk], throw=True)
    array.refresh_from_db()
    assert array.submitted_at is None
    assert [Job.objects.get(pk=j.pk).state for j in members] == ["queued"] * 3
    monkeypatch.setattr(Job, "transition", real)
    JobArray.objects.filter(pk=array.pk).update(submit_claimed_at=None)  # (its claim lapsed)
    tasks.submit_array.apply(args=[array.pk])
    array.refresh_from_db()
    assert array.submitted_at is not None and array.scheduler_array_id == "88"
    for job in members:
        job.refresh_from_db()
        assert job.state == "pending" and job.scheduler_job_id == f"88_{job.array_index}"
        assert job.message == "Adopted the job array an earlier attempt submitted."
