"""The sync at a centre's population (real Slurm): 200 cluster accounts with a job each
(`make devcluster-accounts` made loaduser001..200), read in a fixed number of commands
through the service account, never once per account. Commands are counted, not timed
(bench/sync_accounts.py times them and reads slurmctld's RPC counts).
"""

import json
import subprocess

import pytest
from django.contrib.auth import get_user_model

from clusters import pool, ssh
from clusters.models import ClusterAccount
from jobs import tasks
from jobs.models import Job
from tests import factories, polling

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]

ACCOUNTS = 200
LOAD_USERS = [f"loaduser{i:03d}" for i in range(1, ACCOUNTS + 1)]

# One held job per (user, name) pair, submitted as that user: "index id" per line, four
# sbatch at a time.
SUBMIT = r"""
xargs -P 4 -L 1 bash -c '
    id=$(runuser -u "$1" -- sbatch --parsable --hold -p cpu -t 5 -J "$2" --wrap true) \
        && echo "$0 ${id%%;*}"'
"""


def submit_held(pairs: list[tuple[str, str]]) -> list[str]:
    """Held Slurm jobs, ``(cluster user, job name)`` each, submitted outside the portal as
    those users (one shell for all: 200 sbatch calls take seconds)."""
    done = subprocess.run(
        ["bash", "-c", SUBMIT],
        input="".join(f"{i} {user} {name}\n" for i, (user, name) in enumerate(pairs)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    ids = dict(line.split() for line in done.stdout.splitlines())
    assert done.returncode == 0 and len(ids) == len(pairs), (done.stdout[-500:], done.stderr)
    return [ids[str(i)] for i in range(len(pairs))]


@pytest.fixture
def population(devcluster, cancel_leftover_slurm_jobs):
    """200 people, each with their cluster account (loaduser###) and one held job."""
    missing = subprocess.run(["id", LOAD_USERS[-1]], capture_output=True).returncode != 0
    if missing:
        pytest.fail(f"no cluster user {LOAD_USERS[-1]}: run `make devcluster-accounts`")
    people = get_user_model().objects.bulk_create(
        get_user_model()(username=f"person-{username}", password="!") for username in LOAD_USERS
    )
    accounts = ClusterAccount.objects.bulk_create(
        factories.account(devcluster, person, username, save=False)
        for person, username in zip(people, LOAD_USERS, strict=True)
    )
    jobs = Job.objects.bulk_create(
        factories.job(account.user, devcluster, "true", cluster_account=account, save=False)
        for account in accounts
    )
    ids = submit_held([(job.cluster_account.username, job.scheduler_name) for job in jobs])
    for job, scheduler_id in zip(jobs, ids, strict=True):
        job.scheduler_job_id = scheduler_id
        job.state = Job.State.PENDING
    Job.objects.bulk_update(jobs, ["scheduler_job_id", "state"])
    yield jobs
    subprocess.run(["scancel", *ids], capture_output=True, timeout=60)


def one_sync(jobs: list[Job]) -> tuple[int, int]:
    """(commands, connections) of one sync of ``jobs``, from a cold connection pool."""
    pool.close_all()
    commands, connections = ssh.counters["commands"], ssh.counters["connections"]
    tasks.sync_jobs(Job.objects.filter(pk__in=[job.pk for job in jobs]))
    return ssh.counters["commands"] - commands, ssh.counters["connections"] - connections


def test_one_read_per_cycle_at_1_50_and_200_accounts(devcluster, population):
    """Through the service account: one squeue a cycle whether 1, 50 or 200 accounts have
    jobs, and every job gets its own owner's status (held, with Slurm's reason)."""
    devcluster.sync_reads_all_jobs = True
    devcluster.save()
    for accounts in (1, 50, ACCOUNTS):
        assert one_sync(population[:accounts]) == (1, 1), f"at {accounts} accounts"
    for job in Job.objects.filter(pk__in=[j.pk for j in population]):
        assert (job.state, job.held, job.pending_reason) == ("pending", True, "held by you")
        assert job.scheduler_unseen_since is None


def test_without_the_reader_each_account_asks_for_itself(
    devcluster, devcluster_info, trusted_ca, population
):
    """The same jobs with the setting off (what a site with PrivateData=jobs gets): one
    connection and one squeue per account, so 50 accounts are 50 of each. The accounts log
    in with certificates signed by the portal (their principals files: the make target).
    (Ten here: bench/sync_accounts.py times 50 and 200.)"""
    trusted_ca(devcluster_info)
    devcluster.ssh_auth = devcluster.SshAuth.CERTIFICATE
    devcluster.sync_reads_all_jobs = False
    devcluster.save()
    assert one_sync(population[:10]) == (10, 10)
    for job in Job.objects.filter(pk__in=[j.pk for j in population[:10]]):
        assert (job.state, job.held) == ("pending", True)


def test_a_job_the_reader_cannot_place_is_asked_through_its_owner(devcluster, owner, population):
    """hpcuser2 names its held job after the owner's job, and the portal's record points at
    it (an id reissued after a controller crash). The one read lists it under hpcuser2, so
    it never speaks for the owner's job: that job is asked about on its owner's connection
    (squeue, then accounting), still unknown, and left as it was, its grace period running.
    """
    devcluster.sync_reads_all_jobs = True
    devcluster.save()
    victim = factories.job(
        owner, devcluster, "true", cluster_account=devcluster.accounts.get(user=owner)
    )
    (forged,) = submit_held([("hpcuser2", victim.scheduler_name)])
    Job.objects.filter(pk=victim.pk).update(scheduler_job_id=forged, state="pending")
    commands, _ = one_sync([victim, *population[:50]])
    victim.refresh_from_db()
    assert (victim.state, victim.held) == ("pending", False)
    assert victim.scheduler_unseen_since is not None
    # The one read (squeue, and sacct for the job it did not find), then the owner's own
    # (the same two): four commands, two of them the owner's, whatever the population.
    assert commands == 4
    subprocess.run(["scancel", forged], capture_output=True, timeout=30)


def test_runs_of_ended_jobs_are_read_once_for_every_owner(devcluster, population):
    """Accounting's record of each run (GPU-hours) for three people's ended jobs: one
    ``sacct`` through the service account, none through theirs (which could not even log
    in: no key, no certificate)."""
    devcluster.sync_reads_all_jobs = True
    devcluster.save()
    ended = population[:3]
    ids = []
    for job in ended:
        done = subprocess.run(
            ["runuser", "-u", job.cluster_account.username, "--", "sbatch", "--parsable"]
            + ["-p", "cpu", "-t", "5", "-D", "/tmp", "-J", job.scheduler_name, "--wrap", "true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        ids.append(done.stdout.strip().split(";")[0])
    for job, scheduler_id in zip(ended, ids, strict=True):
        job.scheduler_job_id, job.state = scheduler_id, Job.State.COMPLETED
    Job.objects.bulk_update(ended, ["scheduler_job_id", "state"])
    names = {scheduler_id: job.scheduler_name for job, scheduler_id in zip(ended, ids, strict=True)}
    seen: dict[str, tuple] = {}

    def recorded() -> bool:  # accounting has the three runs, ended, under their names
        # (Slurm 22.05's JSON names a job "allocation" for a moment after it ends.)
        nonlocal seen
        out = subprocess.run(
            ["sacct", "--json", "-X", "-D", "-j", ",".join(ids)],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        seen = {str(r["job_id"]): (r["name"], r["time"]["end"]) for r in json.loads(out)["jobs"]}
        return all(i in seen and seen[i][0] == names[i] and seen[i][1] for i in ids)

    polling.until(recorded, 180, lambda: f"accounting to record the ends: {seen}")
    pool.close_all()
    before = ssh.counters["commands"], ssh.counters["connections"]
    tasks.record_attempts.apply(args=[[job.pk for job in ended]], throw=True)
    used = (ssh.counters["commands"] - before[0], ssh.counters["connections"] - before[1])
    recorded = {
        job.scheduler_job_id: list(job.attempts.values_list("ended_at", "node")) for job in ended
    }
    assert used == (1, 1), recorded
    for job in ended:
        (run,) = job.attempts.all()
        assert run.ended_at is not None and run.node in ("node1", "node2")
