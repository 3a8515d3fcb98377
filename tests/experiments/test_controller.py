"""The controller's steps and the service on the database, the scheduler left out (the
real path is tests/devcluster/test_experiments.py)."""

import pytest
from django.utils import timezone

from experiments import controller, service, spec
from experiments.models import Experiment, Trial
from jobs.models import Job, JobArray
from metrics.ingest import ingest, parse_record
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    """Submissions and steps the controller queues are recorded, not sent."""
    from experiments import tasks as experiment_tasks
    from jobs import tasks

    sent = []
    monkeypatch.setattr(tasks.submit_array, "delay", lambda *a: sent.append(("submit", a)))
    monkeypatch.setattr(tasks.cancel_job, "delay", lambda *a: sent.append(("cancel", a)))
    monkeypatch.setattr(tasks.submit_job, "delay", lambda *a: sent.append(("job", a)))
    monkeypatch.setattr(
        experiment_tasks.advance_experiment, "delay", lambda *a: sent.append(("step", a))
    )
    return sent


@pytest.fixture
def experiment(owner, cluster, image, django_capture_on_commit_callbacks):
    factories.account(cluster, owner, "alice")  # the launch rules ask for it at each batch
    return factories.experiment_record(
        owner, cluster, image, method="random", max_trials=5, max_concurrent=4, folds=2
    )


def log(job: Job, *points: tuple[int, float], key: str = "val_accuracy") -> None:
    records = [
        parse_record({"seq": i, "step": s, "time": 1.7e9 + i, "metrics": {key: v}})
        for i, (s, v) in enumerate(points)
    ]
    ingest(job, records)


def finish(job: Job, state: str = "completed") -> None:
    Job.objects.filter(pk=job.pk).update(
        state=state, ended_at=timezone.now() - timezone.timedelta(minutes=5)
    )


def step(experiment, capture):
    with capture(execute=True):
        controller.advance(experiment.pk)
    experiment.refresh_from_db()


def test_a_step_starts_one_array_that_fills_the_free_slots(
    experiment, django_capture_on_commit_callbacks, no_broker
):
    step(experiment, django_capture_on_commit_callbacks)
    trials = list(experiment.trials.all())
    jobs = list(Job.objects.filter(trial__experiment=experiment).order_by("array_index"))
    # random: every remaining configuration at once, throttled to the 4 free slots
    assert len(trials) == 5 and len(jobs) == 10
    array = JobArray.objects.get()
    assert array.throttle == 4 and [j.array_index for j in jobs] == list(range(10))
    assert [(j.trial.number, j.fold) for j in jobs[:3]] == [(0, 0), (0, 1), (1, 0)]
    assert jobs[1].name == f"experiment {experiment.pk} #0 fold 2/2"
    assert no_broker == [("submit", (array.pk,))]
    # The next step finds no free slot (10 jobs queued): nothing more.
    step(experiment, django_capture_on_commit_callbacks)
    assert JobArray.objects.count() == 1 and experiment.state == "running"


def test_bayesian_batches_are_just_the_free_slots(cluster):
    exp = Experiment(method="bayesian", folds=5, cluster=cluster)
    assert controller.batch_size(exp, free=4, remaining=20) == 1
    exp.folds = 1
    assert controller.batch_size(exp, free=4, remaining=20) == 4
    assert controller.batch_size(exp, free=4, remaining=2) == 2
    exp.method, exp.cluster.max_array_size = "random", 11
    assert controller.batch_size(exp, free=4, remaining=20) == 10  # array ids 0-9 fit


def test_trials_are_scored_by_the_mean_over_folds_and_the_experiment_finishes(
    experiment, django_capture_on_commit_callbacks
):
    step(experiment, django_capture_on_commit_callbacks)
    values = {0: (0.5, 0.7), 1: (0.9, 0.9), 2: (0.1, 0.3), 3: (0.2, 0.2), 4: (0.6, 0.6)}
    for trial in experiment.trials.all():
        for job in trial.jobs.all():
            log(job, (1, 0.0), (2, values[trial.number][job.fold]))
            finish(job)
    failing = Job.objects.get(trial__number=3, fold=1, trial__experiment=experiment)
    Job.objects.filter(pk=failing.pk).update(
        state="failed", message="The job exited with status 1."
    )
    step(experiment, django_capture_on_commit_callbacks)
    trials = {t.number: t for t in experiment.trials.all()}
    assert trials[0].value == pytest.approx(0.6) and trials[0].fold_values == [0.5, 0.7]
    assert trials[0].value_std == pytest.approx(0.1414, abs=1e-4)
    assert trials[0].intermediate == {"1": 0.0, "2": pytest.approx(0.6)}
    assert trials[3].state == "failed"
    assert trials[3].message == "Fold 1 failed: The job exited with status 1."
    assert experiment.state == "completed"
    assert experiment.message == (
        "5 trials: 4 completed, 1 failed. Best: trial 1, val_accuracy = 0.9."
    )


def test_a_completed_run_that_never_logged_the_metric_fails_after_the_settle_time(
    experiment, django_capture_on_commit_callbacks, settings
):
    step(experiment, django_capture_on_commit_callbacks)
    trial = experiment.trials.get(number=0)
    for job in trial.jobs.all():
        log(job, (1, 0.3), key="loss")
        Job.objects.filter(pk=job.pk).update(state="completed", ended_at=timezone.now())
    step(experiment, django_capture_on_commit_callbacks)
    assert experiment.trials.get(number=0).state == "running"  # its metrics may be on the way
    Job.objects.filter(trial=trial).update(ended_at=timezone.now() - timezone.timedelta(minutes=1))
    step(experiment, django_capture_on_commit_callbacks)
    trial.refresh_from_db()
    assert (trial.state, trial.message) == (
        "failed",
        "Fold 0 completed without logging val_accuracy.",
    )


def test_cancelling_cancels_every_open_job_and_ends_cancelled(
    experiment, django_capture_on_commit_callbacks, no_broker
):
    step(experiment, django_capture_on_commit_callbacks)
    Job.objects.filter(trial__experiment=experiment).update(state="running", scheduler_job_id="9_0")
    with django_capture_on_commit_callbacks(execute=True):
        assert service.cancel(experiment)
    step(experiment, django_capture_on_commit_callbacks)
    cancels = [a for kind, a in no_broker if kind == "cancel"]
    assert len(cancels) == 10
    job = Job.objects.filter(trial__experiment=experiment).first()
    assert job.cancel_reason == "The experiment was cancelled."
    Job.objects.filter(trial__experiment=experiment).update(
        state="cancelled", ended_at=timezone.now()
    )
    step(experiment, django_capture_on_commit_callbacks)
    assert experiment.state == "cancelled" and experiment.message.startswith(
        "5 trials: 5 cancelled"
    )


def test_the_service_names_every_wrong_field_of_spec_and_launch(owner, cluster, image):
    factories.account(cluster, owner, "alice")
    with pytest.raises(spec.SpecError) as caught:
        service.create(
            owner,
            factories.experiment_spec(
                image.slug,
                "train",
                launch={
                    "container": image.slug,
                    "partition": "cpu",
                    "cpus": 999,
                    "kind": "notebook",
                },
                folds=0,
            ),
        )
    errors = caught.value.errors
    assert errors["folds"] == "A whole number from 1 to 20."
    assert errors["launch.kind"] == "Trials are batch jobs."
    assert "launch.cpus" in errors and not Experiment.objects.exists()


def test_the_service_keeps_the_spec_text_and_the_launch(
    owner, cluster, image, django_capture_on_commit_callbacks, no_broker
):
    factories.account(cluster, owner, "alice")
    text = (
        f"launch: {{container: {image.slug}, partition: cpu, command: train, cpus: 2}}\n"
        "parameters: {zeta: [1, 2], lr: [0.1, 0.01]}\nobjective: {metric: loss, goal: minimize}\n"
    )
    with django_capture_on_commit_callbacks(execute=True):
        experiment = service.create(owner, text)
    assert experiment.spec_text == text and experiment.goal == "minimize"
    experiment = Experiment.objects.get(pk=experiment.pk)  # as stored (jsonb sorts keys)
    assert list(experiment.space) == ["zeta", "lr"]
    assert experiment.launch["cpus"] == 2 and experiment.launch["command"] == "train"
    assert ("step", (experiment.pk,)) in no_broker


def test_relaunching_the_best_trial_is_an_ordinary_job_with_its_parameters(
    experiment, owner, no_broker, django_capture_on_commit_callbacks
):
    experiment.pass_arguments = True
    trial = Trial.objects.create(experiment=experiment, number=0, params={"lr": 0.25, "act": "x y"})
    with django_capture_on_commit_callbacks(execute=True):
        job = service.relaunch(trial, owner)
    assert job.trial_id is None and job.array_id is None and job.state == "queued"
    assert job.command == (
        'export PORTAL_PARAMS_JSON=\'{"act": "x y", "lr": 0.25}\' PORTAL_PARAM_LR=0.25 '
        "PORTAL_PARAM_ACT='x y'\ntrain --lr=0.25 '--act=x y'"
    )
    assert ("job", (job.pk,)) in no_broker


def test_jobs_behind_a_throttle_hold_no_slot(experiment, django_capture_on_commit_callbacks):
    """4 slots, 5 folds per configuration: the first array is one trial's 5 folds at %4.
    When two of them end, its 3 open jobs may all run and 1 slot is free: the next array
    (one configuration, 5 folds) is throttled to it, so at most 4 run at any time, and its
    queued folds do not count until the first array's end frees more slots."""
    Experiment.objects.filter(pk=experiment.pk).update(method="bayesian", folds=5, max_concurrent=4)
    experiment.refresh_from_db()
    step(experiment, django_capture_on_commit_callbacks)
    first = JobArray.objects.get()
    assert first.throttle == 4 and first.jobs.count() == 5
    assert controller.slots_in_use(experiment) == 4
    for job in first.jobs.order_by("array_index")[:2]:
        finish(job)
    assert controller.slots_in_use(experiment) == 3
    step(experiment, django_capture_on_commit_callbacks)
    second = JobArray.objects.exclude(pk=first.pk).get()
    assert second.throttle == 1 and second.jobs.count() == 5
    assert controller.slots_in_use(experiment) == 4


def test_a_trial_stopped_as_its_last_fold_completed_counts_as_completed(experiment):
    trial = Trial.objects.create(
        experiment=experiment, number=0, params={}, stop_requested=True, message="Stopped early"
    )
    done = [Job(state="completed", fold=0), Job(state="completed", fold=1)]
    assert trial.state_from_jobs(done) == ("completed", "")
    stopped = [Job(state="completed", fold=0), Job(state="cancelled", fold=1)]
    assert trial.state_from_jobs(stopped) == ("stopped", "Stopped early")


def test_an_experiment_whose_first_trials_all_fail_starts_no_more(
    experiment, django_capture_on_commit_callbacks
):
    """A broken launch (every job exits 127) would otherwise burn the whole budget: one
    trial at a time, the fourth is never started."""
    Experiment.objects.filter(pk=experiment.pk).update(method="bayesian", max_concurrent=1, folds=1)
    experiment.refresh_from_db()
    for _ in range(4):
        step(experiment, django_capture_on_commit_callbacks)
        Job.objects.filter(trial__experiment=experiment, state="queued").update(
            state="failed", message="The job exited with status 127.", ended_at=timezone.now()
        )
    step(experiment, django_capture_on_commit_callbacks)
    assert experiment.trials.count() == 3
    assert experiment.state == "completed"
    assert experiment.message == (
        "Stopped: the first 3 trials all failed, so every trial would. Trial 0: Its job "
        "failed: The job exited with status 127. Fix the launch and start a new experiment."
    )


def test_one_completed_trial_keeps_the_experiment_going(cluster, owner, image):
    good = Trial(number=1, state="completed", params={})
    bad = [Trial(number=n, state="failed", params={}, message="x") for n in (0, 2, 3)]
    assert controller.first_trials_all_failed([*bad, good]) == ""
    assert controller.first_trials_all_failed(bad).startswith("Stopped: the first 3 trials")


def test_trials_keep_a_launch_by_gpu_capability_and_memory(
    owner, cluster, image, django_capture_on_commit_callbacks
):
    factories.account(cluster, owner, "alice")
    factories.image("host", supports_gpu=True)
    factories.gpu_type(cluster, "v100", "7.0", 32, feature="v100")
    factories.gpu_type(cluster, "a100", "8.0", 80, feature="a100")
    launch = factories.experiment_spec("host", "train")["launch"] | {
        "partition": "gpu",
        "gpus": 1,
        "min_gpu_memory_gb": 20,
    }
    made = factories.experiment(owner, launch=launch)
    assert made.launch["gpu_constraint"] == "v100|a100"
    step(made, django_capture_on_commit_callbacks)
    jobs = Job.objects.filter(trial__experiment=made)
    assert {(j.gpus, j.gpu_type, j.gpu_constraint) for j in jobs} == {(1, "", "v100|a100")}


def test_a_resumable_launch_is_refused_for_an_experiment(owner, cluster, image):
    with pytest.raises(spec.SpecError) as caught:
        factories.experiment(owner, launch={"command": "train", "resumable": True})
    assert "do not checkpoint and requeue" in caught.value.errors["launch.resumable"]


@pytest.mark.parametrize(("running", "finished"), [(2, 4), (8, 16)])
def test_a_step_asks_the_pruner_from_one_study_whatever_the_running_trials(
    owner, cluster, image, monkeypatch, running, finished
):
    """Early stopping asks about every running trial from one study built per step: its
    cost is the history's size (one Optuna trial per recorded trial), not that times the
    running trials (R × N trials of up to 2,000 values each, every few seconds)."""
    from experiments import search

    experiment = factories.experiment_record(
        owner, cluster, image, method="random", stopping="median", stopping_min_trials=3
    )
    params = {"lr": 0.01, "act": "relu"}
    for number in range(finished):
        Trial.objects.create(
            experiment=experiment,
            number=number,
            params=params,
            state="completed",
            value=0.9,
            intermediate={str(s): 0.5 + s / 1000 for s in range(200)},
        )
    for number in range(finished, finished + running):
        Trial.objects.create(
            experiment=experiment,
            number=number,
            params=params,
            state="running",
            intermediate={str(s): (0.9 if number % 2 else 0.1) for s in range(100)},
        )
    studies, built = [], []
    real_study, real_trial = search.study, search.create_trial
    monkeypatch.setattr(search, "study", lambda *a, **k: studies.append(1) or real_study(*a, **k))
    monkeypatch.setattr(search, "create_trial", lambda **k: built.append(1) or real_trial(**k))
    controller.stop_unpromising(experiment, list(experiment.trials.all()))
    assert len(studies) == 1 and len(built) == finished + running
    # Each running trial still got its own verdict: the poor half stopped, the rest not.
    stopped = set(experiment.trials.filter(stop_requested=True).values_list("number", flat=True))
    assert stopped == {n for n in range(finished, finished + running) if n % 2 == 0}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("image", "no longer offered"),
        ("cluster", "a disabled cluster takes no new jobs"),
        ("partition", "Partition cpu allows at most 1 CPUs per job."),
        ("owner", "owner's account was deactivated"),
    ],
)
def test_trials_start_only_while_the_launch_rules_allow_them(
    experiment, django_capture_on_commit_callbacks, no_broker, change, why
):
    """Each new batch is checked as a launch is (image offered, cluster enabled, the
    partition's current limits, the owner active): once an administrator disables any of
    them the experiment is stopped with the reason, its open jobs cancelled, and no trial
    starts."""
    Experiment.objects.filter(pk=experiment.pk).update(method="bayesian", max_concurrent=2, folds=1)
    experiment.refresh_from_db()
    step(experiment, django_capture_on_commit_callbacks)
    assert experiment.trials.count() == 2
    Job.objects.filter(trial__experiment=experiment).update(state="completed")
    first = Job.objects.filter(trial__experiment=experiment).first()
    Job.objects.filter(pk=first.pk).update(state="running")  # one still runs
    if change == "image":
        type(first.image).objects.filter(pk=first.image_id).update(enabled=False)
    elif change == "cluster":
        type(first.cluster).objects.filter(pk=first.cluster_id).update(enabled=False)
    elif change == "partition":
        type(first.partition).objects.filter(pk=first.partition_id).update(max_cpus_per_job=1)
        Experiment.objects.filter(pk=experiment.pk).update(launch={**experiment.launch, "cpus": 2})
    else:
        type(experiment.owner).objects.filter(pk=experiment.owner_id).update(is_active=False)
    no_broker.clear()
    step(experiment, django_capture_on_commit_callbacks)
    assert experiment.trials.count() == 2 and JobArray.objects.count() == 1
    assert experiment.cancel_requested_at is not None
    assert experiment.message.startswith("Stopped: ") and why in experiment.message
    assert no_broker == [("cancel", (first.pk,))]  # the running job is cancelled, nothing new
    Job.objects.filter(pk=first.pk).update(state="cancelled")
    step(experiment, django_capture_on_commit_callbacks)
    assert experiment.state == "cancelled" and why in experiment.message
    assert JobArray.objects.count() == 1


def test_the_service_keeps_each_user_within_the_experiment_budgets(
    owner, outsider, cluster, image, settings, monkeypatch
):
    """Trials per experiment, experiments running at once and the jobs they run at once
    are capped per user when an experiment starts, each with its own message."""
    from experiments import tasks as experiment_tasks

    monkeypatch.setattr(experiment_tasks.advance_experiment, "delay", lambda *a: None)
    settings.PORTAL_EXPERIMENT_MAX_TRIALS = 10
    settings.PORTAL_EXPERIMENTS_MAX_RUNNING = 2
    settings.PORTAL_EXPERIMENTS_MAX_CONCURRENT = 5
    for user, name in ((owner, "alice"), (outsider, "bob")):
        factories.account(cluster, user, name)
    with pytest.raises(spec.SpecError) as refused:
        factories.experiment(owner, image.slug, budget={"max_trials": 11, "max_concurrent": 1})
    assert refused.value.errors == {
        "budget.max_trials": "At most 10 trials per experiment on this portal: ask for fewer."
    }
    factories.experiment(owner, image.slug, budget={"max_trials": 10, "max_concurrent": 3})
    with pytest.raises(spec.SpecError) as refused:
        factories.experiment(owner, image.slug, budget={"max_trials": 4, "max_concurrent": 3})
    assert refused.value.errors == {
        "budget.max_concurrent": "Your experiments may run at most 5 jobs at once in all; "
        "those running take 3: ask for at most 2."
    }
    factories.experiment(owner, image.slug, budget={"max_trials": 4, "max_concurrent": 2})
    with pytest.raises(spec.SpecError) as refused:
        factories.experiment(owner, image.slug, budget={"max_trials": 4, "max_concurrent": 1})
    assert refused.value.errors["budget"] == (
        "You have 2 experiments running, the most this portal allows at once: wait for one "
        "to end, or cancel one."
    )
    # Another user's budget is their own; an ended experiment frees its share.
    factories.experiment(outsider, image.slug, budget={"max_trials": 4, "max_concurrent": 5})
    Experiment.objects.filter(owner=owner).last().finish(Experiment.State.CANCELLED)  # 3 jobs
    factories.experiment(owner, image.slug, budget={"max_trials": 4, "max_concurrent": 3})
    assert Experiment.objects.filter(owner=owner, state="running").count() == 2
