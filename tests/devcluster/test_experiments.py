"""Experiments on the real dev cluster with the whole stack (web, Celery worker, beat):
trials as Slurm job arrays with a % throttle, early stopping, a failing trial, a worker
killed with SIGKILL in the middle."""

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


def test_a_sweep_runs_as_throttled_arrays_and_a_failing_trial_does_not_stop_it(
    stack, devcluster, owner
):
    factories.image("host-sweep")
    account = devcluster.accounts.get(user=owner)
    # lr < 0.01 exits 1 (a "diverged" run); the others log val_accuracy per step.
    command = (
        'python3 -c "import json,os,sys,time,portal_metrics as pm; p=pm.params(); '
        "f,k=pm.fold(); sys.exit(1) if p['lr']<0.01 else None; "
        "[pm.log(step=s, val_accuracy=min(1, p['lr']*s)) or time.sleep(0.2) for s in range(1,6)]; "
        'pm.close()"'
    )
    experiment = factories.experiment(
        owner,
        "host-sweep",
        command,
        method="grid",
        parameters={"lr": [0.001, 0.05, 0.1, 0.2], "hidden": [8]},
        budget={"max_trials": 4, "max_concurrent": 3},
        folds=2,
    )
    seen: list[str] = []

    def watch():
        seen.append(remote(account, ["squeue", "-h", "-o", "%i %t %r"]))

    experiment = wait_experiment(experiment, 240, watch)
    assert experiment.state == "completed", experiment.message
    trials = {t.number: t for t in experiment.trials.all()}
    assert [t.state for t in trials.values()].count("completed") == 3, [
        (t.state, t.message) for t in trials.values()
    ]
    # One array of 4 trials × 2 folds, at most 3 at once: squeue shows the throttle.
    assert any("%3]" in s for s in seen), seen[:5]
    trials = {t.number: t for t in experiment.trials.all()}
    assert trials[0].state == "failed" and "exited" in trials[0].message
    assert all(trials[n].state == "completed" for n in (1, 2, 3))
    assert trials[3].value == pytest.approx(1.0) and trials[1].value == pytest.approx(0.25)
    assert len(trials[2].fold_values) == 2 and trials[2].value_std == pytest.approx(0)
    jobs = Job.objects.filter(trial__experiment=experiment)
    assert jobs.count() == 8 and len({j.array_id for j in jobs}) == 1
    assert {j.scheduler_job_id.split("_")[1] for j in jobs} == {str(i) for i in range(8)}
    assert "Best: trial 3" in experiment.message


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
    # The better the lr, the higher the curve; 10 steps of 0.3 s (about 3 s per run).
    command = (
        'python3 -c "import math,time,portal_metrics as pm; p=pm.params(); '
        "q=1/(1+abs(math.log10(p['lr'])+1)); "
        "[pm.log(step=s, val_accuracy=q*s/10) or pm.flush() or time.sleep(0.3) "
        'for s in range(1,11)]; pm.close()"'
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
    from jobs.experiments import service

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
