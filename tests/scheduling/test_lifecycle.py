"""Job lifecycle on both real schedulers (the dev cluster's Slurm, the pool's HTCondor):
the tasks' code over real SSH, one test per behaviour over ``scheduler_cluster``. Outages,
pending reasons and what only one scheduler does: tests/devcluster/test_lifecycle.py,
tests/condorpool/test_lifecycle.py."""

import re
import uuid

import pytest

from clusters import files, ssh
from common.prometheus import command_name
from jobs import tasks
from jobs.models import Job
from tests import factories, polling
from tests.devcluster.helpers import remote, run_until, submit_from_threads, sync_until
from tests.scheduling.helpers import EVERY_GPU, NODES, hold

pytestmark = [pytest.mark.django_db]

# A job's id: Slurm's number; HTCondor's cluster.proc.
SCHEDULER_ID = {"slurm": r"\d+", "htcondor": r"\d+\.0"}

# How the portal keeps a job's script (Job.script): HTCondor's is the submit description,
# a separator line, then job.sh.
HTCONDOR_SCRIPTS = "\n#-- portal: end of job.sub; job.sh follows --\n"


def kept_files(job: Job) -> dict[str, str]:
    """What the submit keeps in the work directory: {file name: its text}."""
    if job.cluster.scheduler == "htcondor":
        description, _, script = job.script.partition(HTCONDOR_SCRIPTS)
        return {"job.sub": description + "\n", "job.sh": script}
    return {"job.sh": job.script}


def test_batch_job_runs_to_completed_and_its_output_is_readable(scheduler_cluster, owner):
    scheduler = scheduler_cluster.scheduler
    job = factories.job(owner, scheduler_cluster, "echo hello from $(hostname); echo oops >&2")
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == Job.State.PENDING, job.message
    assert re.fullmatch(SCHEDULER_ID[scheduler], job.scheduler_job_id), job.scheduler_job_id
    account = job.cluster_account
    assert job.work_dir == f"/home/{account.username}/.portal/jobs/{job.pk}-{job.uid}"
    job = run_until(job, {"completed", "failed"})
    assert (job.state, job.exit_code) == ("completed", 0), job.message
    assert [e.to_state for e in job.events.all()][0] == "pending"
    assert job.events.last().to_state == "completed"
    assert job.node in NODES[scheduler], job.node
    out = files.read_job_log(job, "stdout")
    assert "hello from " in out.text and not out.truncated
    assert "oops" in files.read_job_log(job, "stderr").text
    # What was submitted is kept in the work directory, readable only by the user.
    for name, text in kept_files(job).items():
        assert remote(account, ["cat", f"{job.work_dir}/{name}"]) == text, name
    assert remote(account, ["stat", "-c", "%a", job.work_dir]).strip() == "700"


def test_command_exiting_3_ends_failed_with_exit_code_3(scheduler_cluster, owner):
    job = factories.submitted_job(owner, scheduler_cluster, "echo about to fail; exit 3")
    job = run_until(job, {"failed", "completed"})
    assert (job.state, job.exit_code) == ("failed", 3)
    assert "exited with status 3" in job.message


def test_cancelling_a_running_job_ends_cancelled(scheduler_cluster, owner):
    job = factories.submitted_job(owner, scheduler_cluster, "sleep 300")
    job = run_until(job, {"running"})
    # Its node (HTCondor's: once the startd's claim reaches the collector).
    sync_until(job, lambda j: j.node, 10, "to have its node")
    assert job.node in NODES[scheduler_cluster.scheduler], job.node
    assert job.request_cancel()
    tasks.cancel_job.apply(args=[job.pk])
    job = run_until(job, {"cancelled"}, timeout=30)
    assert job.ended_at is not None


@pytest.mark.alone  # it takes every GPU (tests/conftest.py)
def test_a_held_job_says_why_and_is_released_through_the_api(scheduler_cluster, owner, monkeypatch):
    """Slurm holds a job whose node could not start it, HTCondor one its policy stops; the
    page and the API say why and offer release. Here the hold is the owner's own, which
    takes the same path through the portal. It waits behind a job that has every GPU, so
    it is still waiting when held and after it is released."""
    from django.test import TestCase

    every_gpu = EVERY_GPU[scheduler_cluster.scheduler]
    blocker = factories.submitted_job(owner, scheduler_cluster, "sleep 300", **every_gpu)
    run_until(blocker, {"running"}, timeout=120)
    job = factories.submitted_job(owner, scheduler_cluster, "echo released", **every_gpu)
    reason = hold(job)
    sync_until(job, lambda j: j.is_held, 30, lambda: f"to be held ({job.pending_reason})")
    # The scheduler's reason as text: one line, no markup interpreted anywhere it is shown.
    assert (job.state, job.pending_reason) == ("pending", reason)
    api = factories.api_client(owner)
    # No worker here: the task runs in this process, over the real SSH connection.
    monkeypatch.setattr(
        tasks.release_job, "delay", lambda pk, *by: tasks.release_job.apply(args=[pk, *by])
    )
    with TestCase.captureOnCommitCallbacks(execute=True):
        assert api.post(f"/api/v1/jobs/{job.pk}/release/").status_code == 202
    sync_until(job, lambda j: not j.is_held, 30, "to be released")
    assert job.state == "pending", job.message  # the blocker still has every GPU
    assert blocker.request_cancel()
    tasks.cancel_job.apply(args=[blocker.pk])
    job = run_until(job, {"completed", "failed"}, timeout=120)
    assert (job.state, job.exit_code) == ("completed", 0), job.message
    assert "released" in files.read_job_log(job, "stdout").text
    assert api.post(f"/api/v1/jobs/{job.pk}/release/").status_code == 409


# The line of the script that sets a 1-minute limit; what shortens it for the test (HTCondor
# removes a job by an expression on an attribute of its own, here made 5 seconds; Slurm
# counts in minutes: the job waits its minute); the message the job ends with.
TIME_LIMIT = {
    "slurm": ("#SBATCH --time=1", None, "The job reached its time limit of 1 minutes."),
    "htcondor": (
        "+PortalTimeLimit = 60",
        ["condor_qedit", "{id}", "PortalTimeLimit", "5"],
        "It reached its time limit.",
    ),
}


def test_the_time_limit_ends_a_job_timeout(scheduler_cluster, owner):
    line, shorten, message = TIME_LIMIT[scheduler_cluster.scheduler]
    job = factories.submitted_job(owner, scheduler_cluster, "sleep 600", time_limit_minutes=1)
    assert line in job.script.splitlines()
    if shorten:
        remote(job.cluster_account, [a.format(id=job.scheduler_job_id) for a in shorten])
    job = run_until(job, {"timeout", "cancelled", "failed", "completed"}, timeout=180)
    assert job.state == "timeout", job.message
    assert job.message == message


# The ids of the user's jobs named ``$1``, in the queue or ended: Slurm's job ids (squeue
# keeps ended jobs for MinJobAge, an hour here), HTCondor's cluster ids (condor_q, then
# condor_history).
JOBS_NAMED = {
    "slurm": 'squeue -h --states=all -u "$(id -un)" --name="$1" -o %i',
    "htcondor": 'condor_q -constraint "PortalName == \\"$1\\"" -af ClusterId; '
    'condor_history -constraint "PortalName == \\"$1\\"" -af ClusterId',
}


def jobs_named(job: Job) -> list[str]:
    """The ids the scheduler knows the job's name by (each once): its own alone, or it was
    submitted twice."""
    command = JOBS_NAMED[job.cluster.scheduler]
    out = remote(job.cluster_account, ["bash", "-c", command, "named", job.scheduler_name])
    return sorted(set(out.split()))


def listed_id(job: Job) -> str:
    """The job's id as jobs_named lists it (HTCondor's cluster: 12.0 -> 12)."""
    return job.scheduler_job_id.split(".")[0]


@pytest.mark.django_db(transaction=True)
def test_duplicated_submit_tasks_produce_one_scheduler_job(scheduler_cluster, owner):
    job = factories.job(owner, scheduler_cluster, "sleep 1")
    errors = submit_from_threads(job)
    assert not errors
    job.refresh_from_db()
    assert jobs_named(job) == [listed_id(job)]
    assert job.events.filter(to_state="pending").count() == 1


def test_redelivered_submit_after_a_lost_update_adopts_the_submitted_job(scheduler_cluster, owner):
    job = factories.submitted_job(owner, scheduler_cluster, "sleep 1")
    first = job.scheduler_job_id

    def submit_again() -> None:
        # Celery redelivers the task (acks_late); the row still says queued, claim expired.
        Job.objects.filter(pk=job.pk).update(
            state="queued", scheduler_job_id="", submit_claimed_at=None
        )
        tasks.submit_job.apply(args=[job.pk])
        job.refresh_from_db()
        assert job.scheduler_job_id == first
        assert "Adopted" in job.events.last().message

    # The worker died after submitting, before its database write landed: the id file in
    # the work directory names the job ...
    submit_again()
    # ... and once that was lost too (the worker died before writing it), the queue, or
    # the history, knows the job by its name.
    remote(job.cluster_account, ["rm", "-f", f"{job.work_dir}/.scheduler_id"])
    submit_again()
    assert jobs_named(job) == [listed_id(job)]


# Whether the user's job named ``$1`` is still queued or running (prints its id then).
LIVE_NAMED = {
    "slurm": 'squeue -h --states=PENDING,RUNNING,CONFIGURING -u "$(id -un)" --name="$1" -o %i',
    "htcondor": 'condor_q -constraint "PortalName == \\"$1\\" && JobStatus =!= 3" -af ClusterId',
}


def live_named(job: Job) -> str:
    command = LIVE_NAMED[job.cluster.scheduler]
    return remote(job.cluster_account, ["bash", "-c", command, "live", job.scheduler_name]).strip()


def test_a_job_cancelled_after_a_submit_that_never_answered_is_withdrawn(scheduler_cluster, owner):
    """The fault run's orphan: a try ran the submit step, its answer was lost (the
    connection dropped) and the job, still queued in the portal, was cancelled. The
    cancel ends it at once and its event withdraws, by name, what runs on the cluster."""
    job = factories.submitted_job(owner, scheduler_cluster, "sleep 300")
    Job.objects.filter(pk=job.pk).update(state="queued", scheduler_job_id="")
    job.refresh_from_db()
    assert job.submit_sent_at is not None and live_named(job)
    assert job.request_cancel() is False
    (event,) = job.events.filter(to_state="cancelled")
    tasks.withdraw_job.apply(args=[job.pk], kwargs={"outbox_event": event.pk})
    polling.until(lambda: not live_named(job), 30, "the withdrawn job to leave the queue")
    job.refresh_from_db()
    assert job.state == "cancelled" and "cancelled too" in job.message
    # Withdrawing again, nothing named so left: not an error.
    tasks.withdraw_job.apply(args=[job.pk]).get()


# How many jobs the test syncs: as many as the cluster runs within seconds (the pool has
# 4 CPUs and claims a slot anew for each job). The commands one sync of them may issue,
# however many they are: while they wait or run (Slurm: squeue --json, which lists ended
# jobs too; HTCondor: condor_q, condor_status for the machines of the running ones,
# condor_history for those that left the queue), and once they all ended.
# (jobs, most commands while they are active, commands once they ended). Slurm: squeue,
# and at most one more: sinfo when some wait for resources (the free nodes they could
# use; schedulers/slurm/operations.query_owners). Two fresh-clone runs, the other half's
# jobs holding the nodes, counted 2 for the 50 jobs where an idle cluster counts 1; the
# assertion names the programs run.
SYNC_COMMANDS = {"slurm": (50, 2, 1), "htcondor": (12, 3, 2)}


def test_one_sync_of_many_jobs_issues_a_constant_number_of_ssh_commands(
    scheduler_cluster, owner, monkeypatch
):
    count, active, after = SYNC_COMMANDS[scheduler_cluster.scheduler]
    ran: list[str] = []  # each command's program, to say which when the count is off
    real = ssh.Connection._run_script

    def recorded(self, command, *args, **kwargs):
        ran.append(command_name(command))
        return real(self, command, *args, **kwargs)

    monkeypatch.setattr(ssh.Connection, "_run_script", recorded)
    # Each job waits for a file the test makes once the active jobs' syncs are counted: a
    # job that ended meanwhile (`sleep 1` could, while the other 49 were being submitted on
    # a loaded machine) is asked about in accounting too.
    go = f".portal-go-{uuid.uuid4().hex}"
    command = f'while [ ! -e "$HOME/{go}" ]; do sleep 0.2; done'
    jobs = [factories.submitted_job(owner, scheduler_cluster, command) for _ in range(count)]
    every = Job.objects.filter(pk__in=[j.pk for j in jobs])

    def commands_for_one_sync(queryset) -> int:
        before = ssh.counters["commands"]
        ran.clear()
        tasks.sync_jobs(queryset)
        return ssh.counters["commands"] - before

    few = commands_for_one_sync(Job.objects.filter(pk__in=[j.pk for j in jobs[:2]]))
    said = list(ran)
    many = commands_for_one_sync(every)
    assert few <= active and many <= active, (few, said, many, ran)
    remote(jobs[0].cluster_account, ["sh", "-c", f'touch "$HOME/{go}"'])

    def ended() -> set[str] | None:
        tasks.sync_jobs(every)
        states = set(every.values_list("state", flat=True))
        return states if states <= set(Job.FINAL_STATES) else None

    assert polling.until(ended, 120, "all to end") == {"completed"}
    remote(jobs[0].cluster_account, ["sh", "-c", f'rm -f "$HOME/{go}"'])
    # Once they ended (seen again from running): the same, however many.
    every.update(state="running")
    assert commands_for_one_sync(every) == after
    assert set(every.values_list("state", flat=True)) == {"completed"}
