"""A sweep on the real HTCondor pool with the whole stack (web, Celery worker, beat): its
trials run as one HTCondor cluster of procs (``queue N``), a failing trial does not stop it."""

from __future__ import annotations

import pytest

from jobs.models import Job
from tests import factories
from tests.devcluster.helpers import remote
from tests.devcluster.test_experiments import wait_experiment
from tests.livestack import LiveStack

pytestmark = [pytest.mark.condorpool, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def stack(condorpool, tmp_path):
    live = LiveStack(tmp_path, sync_interval=1.0, env={"PORTAL_EXPERIMENT_INTERVAL": "1"}).start()
    yield live
    live.stop()


def test_a_small_sweep_runs_as_one_htcondor_cluster(stack, condorpool, owner):
    factories.image("host-sweep")
    account = condorpool.accounts.get(user=owner)
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
        # Room for every fold of every trial at once: HTCondor has no array throttle, so
        # the controller submits only what may run (fewer slots: more, smaller clusters).
        budget={"max_trials": 4, "max_concurrent": 8},
        folds=2,
    )
    spec["launch"]["cluster"] = condorpool.name
    from jobs.experiments import service

    experiment = service.create(owner, spec)
    clusters: set[str] = set()

    def watch():
        out = remote(account, ["condor_q", "-af", "ClusterId", "ProcId", "PortalName"])
        clusters.update(line.split()[0] for line in out.splitlines() if line.strip())

    experiment = wait_experiment(experiment, 240, watch)
    assert experiment.state == "completed", experiment.message
    trials = {t.number: t for t in experiment.trials.all()}
    assert trials[0].state == "failed" and "exited" in trials[0].message
    assert all(trials[n].state == "completed" for n in (1, 2, 3)), [
        (t.state, t.message) for t in trials.values()
    ]
    assert trials[3].value == pytest.approx(1.0) and trials[1].value == pytest.approx(0.25)
    assert len(trials[2].fold_values) == 2
    # 4 trials × 2 folds: one array, one HTCondor cluster, procs 0-7.
    jobs = Job.objects.filter(trial__experiment=experiment)
    assert jobs.count() == 8 and len({j.array_id for j in jobs}) == 1
    ids = {j.scheduler_job_id for j in jobs}
    assert {i.split(".")[1] for i in ids} == {str(i) for i in range(8)}
    assert len({i.split(".")[0] for i in ids}) == 1
    assert len(clusters) <= 1, clusters
    assert "Best: trial 3" in experiment.message
