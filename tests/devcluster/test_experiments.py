"""Experiments on the real dev cluster with the whole stack (web, Celery worker, beat):
early stopping, a worker killed with SIGKILL in the middle, cancelling, a deactivated
owner. A sweep as one throttled array, a failing trial: on both schedulers,
tests/scheduling/test_experiments.py."""

from __future__ import annotations

import pytest

from jobs.models import Job
from tests import factories, polling
from tests.devcluster.helpers import remote, wait_experiment
from tests.livestack import LiveStack

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def stack(devcluster, tmp_path):
    # A claim to submit left by a killed worker is taken over PORTAL_TASK_TIME_LIMIT (+10 s)
    # after it was made: 40 s here rather than the default 3 minutes (a submit takes ~1 s).
    env = {"PORTAL_EXPERIMENT_INTERVAL": "1", "PORTAL_TASK_TIME_LIMIT": "40"}
    live = LiveStack(tmp_path, sync_interval=1.0, env=env).start()
    yield live
    live.stop()


@pytest.mark.timeout(600)  # a worker killed mid-submit: its claim is taken over after
# PORTAL_TASK_TIME_LIMIT (a live worker might still be submitting): 40 s in this stack
def test_early_stopping_cancels_with_its_reason_and_a_killed_worker_loses_no_trial(
    stack, devcluster, owner
):
    """Bayesian search, median rule: trials whose curve lies under the median are
    scancelled with the rule's words. The Celery worker is killed with SIGKILL (its
    process group) while trials run and started again: every trial exists once, with one
    job per fold, and Slurm ran each array task once."""
    factories.image("host-sweep")
    account = devcluster.accounts.get(user=owner)
    # The better the lr, the higher the curve; 30 steps of 0.3 s (about 9 s per run). A
    # trial under the median is one from step 4 on: the rule has some 8 s to see it, time
    # for the metrics, the sync and a tick on a loaded machine (3 s runs were too short
    # when the worker's restart fell on the trials that could be stopped).
    command = (
        'python3 -c "import math,time,portal_metrics as pm; p=pm.params(); '
        "q=1/(1+abs(math.log10(p['lr'])+1)); "
        "[pm.log(step=s, val_accuracy=q*s/30) or pm.flush() or time.sleep(0.3) "
        'for s in range(1,31)]; pm.close()"'
    )
    experiment = factories.experiment(
        owner,
        "host-sweep",
        command,
        method="bayesian",
        parameters={"lr": {"type": "float", "low": 0.0001, "high": 1.0, "log": True}},
        budget={"max_trials": 8, "max_concurrent": 3},
        early_stopping={"method": "median", "min_trials": 2, "warmup_steps": 3},
        seed=3,
    )
    killed = []

    def watch():
        started = experiment.trials.count()
        if not killed and started >= 4:
            stack.restart("worker", hard=True)  # SIGKILL to its process group, then again
            killed.append(started)

    experiment = wait_experiment(experiment, 480, watch)
    assert killed, "the worker was never killed"
    assert experiment.state == "completed", experiment.message
    trials = list(experiment.trials.order_by("number"))
    assert [t.number for t in trials] == list(range(8))
    jobs = list(Job.objects.filter(trial__experiment=experiment))
    assert len(jobs) == 8 and all(j.is_final for j in jobs)
    ids = [j.scheduler_job_id for j in jobs]
    assert len(set(ids)) == 8 and all("_" in i for i in ids)
    # Nothing was submitted twice: every array sacct knows under the experiment's names
    # (a duplicated submission would be a second array with the same name) is a recorded
    # one, and each started task is one of the jobs' tasks.
    names = sorted({j.scheduler_name for j in Job.objects.filter(pk__in=[j.pk for j in jobs])})
    by_name = remote(
        account, ["sacct", "-n", "-X", "-P", "-o", "JobID", f"--name={','.join(names)}"]
    ).split()
    arrays = {i.split("_")[0] for i in ids}
    assert by_name and {i.split("_")[0] for i in by_name} <= arrays, by_name
    assert {i if "_" in i else f"{i}_0" for i in by_name} <= set(ids), by_name
    stopped = [t for t in trials if t.state == "stopped"]
    assert stopped, [(t.number, t.state, t.intermediate) for t in trials]
    for trial in stopped:
        assert trial.message.startswith("Stopped early by the median rule at step")
        job = trial.jobs.get()
        assert job.state == "cancelled" and job.message == trial.message
    assert any(t.state == "completed" for t in trials)


def two_trials_running(owner, command: str, method: str):
    """A sweep of 6 trials, 2 at a time, once its first two jobs run: (experiment, the
    Slurm names of its jobs so far)."""
    factories.image("host-sweep")
    experiment = factories.experiment(
        owner,
        "host-sweep",
        command,
        method=method,
        budget={"max_trials": 6, "max_concurrent": 2},
    )
    polling.until(
        lambda: Job.objects.filter(trial__experiment=experiment, state="running").count() >= 2,
        90,
        "the first two trials to run",
        interval=1,
    )
    return experiment, {j.scheduler_name for j in Job.objects.filter(trial__experiment=experiment)}


def test_cancelling_an_experiment_scancels_its_running_and_throttled_jobs(stack, devcluster, owner):
    from experiments import service

    account = devcluster.accounts.get(user=owner)
    experiment, names = two_trials_running(owner, "sleep 300", "random")
    assert service.cancel(experiment)
    experiment = wait_experiment(experiment, 90)
    assert experiment.state == "cancelled"
    jobs = Job.objects.filter(trial__experiment=experiment)
    assert jobs.count() == 6 and {j.state for j in jobs} == {"cancelled"}
    assert {j.message for j in jobs} == {"The experiment was cancelled."}
    assert {t.state for t in experiment.trials.all()} == {"cancelled"}
    left = remote(account, ["squeue", "-h", "-o", "%j"]).split()
    assert not names & set(left), left


def test_a_deactivated_owners_experiment_stops_submitting(stack, devcluster, owner):
    """An administrator deactivates the owner while a Bayesian sweep runs its first batch:
    no further trial is submitted, its running jobs are scancelled, and the experiment ends
    cancelled saying why."""
    account = devcluster.accounts.get(user=owner)
    experiment, names = two_trials_running(owner, "sleep 60", "bayesian")
    owner.is_active = False
    owner.save(update_fields=["is_active"])
    experiment = wait_experiment(experiment, 90)
    assert experiment.state == "cancelled", experiment.message
    assert experiment.message.startswith("Stopped: owner's account was deactivated.")
    assert experiment.trials.count() == 2
    jobs = Job.objects.filter(trial__experiment=experiment)
    assert jobs.count() == 2 and {j.state for j in jobs} == {"cancelled"}
    left = remote(account, ["squeue", "-h", "-o", "%j"]).split()
    assert not names & set(left), left
