"""A sweep on both real schedulers with the whole stack (web, Celery worker, beat): its
trials run as one array (a Slurm job array, an HTCondor cluster of procs), a failing
trial does not stop it. Early stopping, a killed worker, cancelling: on Slurm,
tests/devcluster/test_experiments.py."""

from __future__ import annotations

import re

import pytest

from jobs.models import Job
from tests import factories
from tests.devcluster.helpers import remote, wait_experiment
from tests.livestack import LiveStack

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def stack(scheduler_cluster, tmp_path):
    live = LiveStack(tmp_path, sync_interval=1.0, env={"PORTAL_EXPERIMENT_INTERVAL": "1"}).start()
    yield live
    live.stop()


# How many of its 8 jobs (4 trials × 2 folds) may run at once: Slurm throttles the array
# (123_[2-7%3] in squeue); HTCondor has no throttle, so the controller submits only what may
# run (fewer: more, smaller clusters), and the test lets all run. The queue, a line per job
# or array ending with its name; the member id's separator (Slurm's 123_4, HTCondor's 12.4).
SWEEP = {
    "slurm": (3, ["squeue", "-h", "-o", "%i %j"], "_"),
    "htcondor": (8, ["condor_q", "-af", "ClusterId", "ProcId", "PortalName"], "."),
}


def test_a_small_sweep_runs_as_one_array_and_a_failing_trial_does_not_stop_it(
    stack, scheduler_cluster, owner
):
    concurrent, queue, separator = SWEEP[scheduler_cluster.scheduler]
    factories.image("host-sweep")
    account = scheduler_cluster.accounts.get(user=owner)
    # lr < 0.01 exits 1 (a "diverged" run); the others log val_accuracy per step.
    command = (
        'python3 -c "import sys,time,portal_metrics as pm; p=pm.params(); '
        "f,k=pm.fold(); sys.exit(1) if p['lr']<0.01 else None; "
        "[pm.log(step=s, val_accuracy=min(1, p['lr']*s)) or time.sleep(0.2) for s in range(1,6)]; "
        'pm.close()"'
    )
    spec = factories.experiment_spec(
        "host-sweep",
        command,
        method="grid",
        parameters={"lr": [0.001, 0.05, 0.1, 0.2], "hidden": [8]},
        budget={"max_trials": 4, "max_concurrent": concurrent},
        folds=2,
    )
    spec["launch"]["cluster"] = scheduler_cluster.name
    from experiments import service

    experiment = service.create(owner, spec)
    seen: list[str] = []  # the queue's lines of the experiment's jobs (by their names)

    def watch():
        names = {j.scheduler_name for j in Job.objects.filter(trial__experiment=experiment)}
        lines = remote(account, queue).splitlines()
        seen.extend(line for line in lines if line.split() and line.split()[-1] in names)

    experiment = wait_experiment(experiment, 240, watch)
    assert experiment.state == "completed", experiment.message
    trials = {t.number: t for t in experiment.trials.all()}
    assert trials[0].state == "failed" and "exited" in trials[0].message
    assert all(trials[n].state == "completed" for n in (1, 2, 3)), [
        (t.state, t.message) for t in trials.values()
    ]
    assert trials[3].value == pytest.approx(1.0) and trials[1].value == pytest.approx(0.25)
    assert len(trials[2].fold_values) == 2 and trials[2].value_std == pytest.approx(0)
    # 4 trials × 2 folds: one array, members 0-7; the scheduler never showed a second one
    # under their name (a duplicated submission).
    jobs = Job.objects.filter(trial__experiment=experiment)
    assert jobs.count() == 8 and len({j.array_id for j in jobs}) == 1
    ids = [j.scheduler_job_id.split(separator) for j in jobs]
    assert {member for _, member in ids} == {str(i) for i in range(8)}
    (array,) = {root for root, _ in ids}
    assert seen and {re.split(r"[_. ]", line)[0] for line in seen} == {array}, seen[:5]
    if concurrent < 8:  # the throttle, as the scheduler shows it
        assert any(f"%{concurrent}]" in line for line in seen), seen[:5]
    assert "Best: trial 3" in experiment.message
