"""The experiment pages and REST API: who sees what, what a refused spec looks like,
the data the page draws, the CSV."""

import csv
import io
import subprocess

import pytest
from django.urls import reverse

from experiments.models import Experiment, Trial
from jobs.models import Job
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    from experiments import tasks as experiment_tasks
    from jobs import tasks

    monkeypatch.setattr(experiment_tasks.advance_experiment, "delay", lambda *a: None)
    monkeypatch.setattr(tasks.submit_job, "delay", lambda *a: None)


@pytest.fixture
def scored(owner, cluster, image):
    """An experiment of ``owner``'s with three trials: two completed, one stopped."""
    experiment = factories.experiment_record(owner, cluster, image, name="lr sweep", folds=2)
    Trial.objects.create(
        experiment=experiment,
        number=0,
        params={"lr": 0.1, "act": "relu"},
        state="completed",
        value=0.8,
        value_std=0.02,
        fold_values=[0.78, 0.82],
        intermediate={"1": 0.5, "2": 0.8},
    )
    Trial.objects.create(
        experiment=experiment,
        number=1,
        params={"lr": 0.01, "act": "=cmd|' /C calc'!A0"},
        state="completed",
        value=0.9,
        fold_values=[0.9, 0.9],
        value_std=0.0,
    )
    Trial.objects.create(
        experiment=experiment,
        number=2,
        params={"lr": 0.5, "act": "tanh"},
        state="stopped",
        message="Stopped early by the median rule at step 2: …",
        intermediate={"1": 0.1},
    )
    return experiment


def test_the_page_and_its_data_are_the_owners_and_staffs_only(
    client, owner, outsider, staff, scored
):
    for path in ("experiment-detail", "experiment-data", "experiment-export"):
        client.force_login(outsider)
        assert client.get(reverse(path, args=[scored.pk])).status_code == 404
        client.force_login(staff)
        assert client.get(reverse(path, args=[scored.pk])).status_code == 200
    client.force_login(outsider)
    assert client.post(reverse("experiment-cancel", args=[scored.pk])).status_code == 404
    api = factories.api_client(outsider)
    assert api.get(f"/api/v1/experiments/{scored.pk}/").status_code == 404
    assert api.get("/api/v1/experiments/").json()["results"] == []


def test_the_data_names_the_best_trial_and_carries_curves(client, owner, scored):
    client.force_login(owner)
    data = client.get(reverse("experiment-data", args=[scored.pk])).json()
    assert data["best"]["number"] == 1 and data["counts"] == {"completed": 2, "stopped": 1}
    assert data["curves"] == {"0": [[1, 0.5], [2, 0.8]], "2": [[1, 0.1]]}
    assert [t["state_label"] for t in data["trials"]] == ["Completed", "Completed", "Stopped early"]
    page = client.get(reverse("experiment-detail", args=[scored.pk])).content.decode()
    assert "Launch the best configuration again" in page and "lr sweep" in page


def test_the_csv_has_a_row_per_trial_and_no_formula_cells(client, owner, scored):
    client.force_login(owner)
    response = client.get(reverse("experiment-export", args=[scored.pk]))
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == [
        "trial",
        "state",
        "lr",
        "act",
        "val_accuracy",
        "std",
        "fold_values",
        "message",
    ]
    assert rows[1][:5] == ["0", "completed", "0.1", "relu", "0.8"]
    assert rows[2][3] == "'=cmd|' /C calc'!A0"  # a spreadsheet shows it, never runs it


def test_a_refused_spec_keeps_its_text_and_says_what_is_wrong(client, owner, cluster, image):
    factories.account(cluster, owner, "alice")
    client.force_login(owner)
    text = f"launch: {{container: {image.slug}, partition: cpu}}\nparameters: {{lr: {{type: float, low: 1, high: 0}}}}\nobjective: {{metric: loss}}\n"
    response = client.post(reverse("experiments"), {"spec": text})
    assert response.status_code == 400
    body = response.content.decode()
    assert "parameters.lr" in body and "low must be below high." in body
    assert "high: 0" in body  # the text is still in the box
    assert not Experiment.objects.exists()


def test_the_form_starts_an_experiment_and_goes_to_its_page(client, owner, cluster, image):
    factories.account(cluster, owner, "alice")
    client.force_login(owner)
    text = f"launch: {{container: {image.slug}, partition: cpu, command: train}}\nparameters: {{lr: [0.1, 0.2]}}\nobjective: {{metric: loss}}\n"
    response = client.post(reverse("experiments"), {"spec": text})
    experiment = Experiment.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse(
        "experiment-detail", args=[experiment.pk]
    )


def test_the_api_creates_from_yaml_text_or_a_json_object_and_names_wrong_fields(
    owner, cluster, image
):
    factories.account(cluster, owner, "alice")
    api = factories.api_client(owner)
    spec = factories.experiment_spec(image.slug, "train")
    created = api.post("/api/v1/experiments/", spec, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["state"] == "running" and created.json()["max_trials"] == 4
    text = (
        f"launch: {{container: {image.slug}, partition: cpu, command: train}}\n"
        "parameters: {lr: [1, 2]}\nobjective: {metric: loss}\n"
    )
    assert api.post("/api/v1/experiments/", {"spec": text}, format="json").status_code == 201
    refused = api.post(
        "/api/v1/experiments/", {**spec, "folds": 0, "launch": {"partition": "nope"}}, format="json"
    )
    assert refused.status_code == 400
    fields = refused.json()["error"]["fields"]
    assert fields["folds"] == ["A whole number from 1 to 20."]
    assert "launch.partition" in fields
    listed = api.get("/api/v1/experiments/").json()
    assert listed["count"] == 2


def test_the_api_cancels_and_relaunches_the_best(owner, scored, django_capture_on_commit_callbacks):
    api = factories.api_client(owner)
    with django_capture_on_commit_callbacks(execute=True):
        relaunched = api.post(f"/api/v1/experiments/{scored.pk}/relaunch/", {}, format="json")
    assert relaunched.status_code == 201
    job = Job.objects.get(pk=relaunched.json()["id"])
    assert "PORTAL_PARAM_LR=0.01" in job.command and job.owner == owner
    missing = api.post(f"/api/v1/experiments/{scored.pk}/relaunch/", {"trial": 9}, format="json")
    assert missing.status_code == 400
    assert api.post(f"/api/v1/experiments/{scored.pk}/cancel/").status_code == 202
    scored.refresh_from_db()
    assert scored.cancel_requested_at is not None


def test_staff_relaunching_anothers_configuration_reads_it_in_the_launch_form(
    client, owner, staff, scored, monkeypatch, django_capture_on_commit_callbacks
):
    """A staff member's click runs nothing as them: the page opens the launch form filled
    with the owner's command (nothing created, nothing submitted); the owner's own
    relaunch still runs at once."""
    from jobs import tasks

    submitted = []
    monkeypatch.setattr(tasks.submit_job, "delay", lambda *a: submitted.append(a))
    best = scored.trials.get(number=1)
    fold = factories.job(owner, scored.cluster, "train", trial=best, fold=0, state="completed")
    jobs_before = Job.objects.count()
    client.force_login(staff)
    page = client.get(reverse("experiment-detail", args=[scored.pk])).content.decode()
    assert "Copy the best configuration into the launch form" in page
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("experiment-relaunch", args=[scored.pk]), follow=True)
    assert response.redirect_chain == [(f"{reverse('launch')}?from={fold.pk}", 302)]
    form = response.context["form"]
    assert "PORTAL_PARAM_LR=0.01" in form.initial["command"]
    told = [str(m) for m in response.context["messages"]]
    assert told == [
        "Trial 1's configuration is owner's: read its command before you launch it. It "
        "would run as you, on your cluster account."
    ]
    assert Job.objects.count() == jobs_before and submitted == []

    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("experiment-relaunch", args=[scored.pk]))
    job = Job.objects.exclude(pk=fold.pk).get()
    assert response["Location"] == reverse("job-detail", args=[job.pk])
    assert job.owner == owner and "PORTAL_PARAM_LR=0.01" in job.command
    assert submitted == [(job.pk,)]


def test_the_api_refuses_staff_a_relaunch_of_anothers_configuration(
    owner, staff, image, scored, monkeypatch, django_capture_on_commit_callbacks
):
    """403, nothing created or submitted; the body carries the job request to read."""
    from jobs import tasks

    submitted = []
    monkeypatch.setattr(tasks.submit_job, "delay", lambda *a: submitted.append(a))
    api = factories.api_client(staff, scopes="read,submit,admin")
    with django_capture_on_commit_callbacks(execute=True):
        refused = api.post(f"/api/v1/experiments/{scored.pk}/relaunch/", {}, format="json")
    assert refused.status_code == 403
    body = refused.json()
    assert "launch it as your own job" in body["error"]["message"]
    assert body["launch"]["container"] == image.slug
    assert "PORTAL_PARAM_LR=0.01" in body["launch"]["command"]
    assert body["launch"]["partition"] == "cpu" and body["launch"]["kind"] == "batch"
    assert not Job.objects.exists() and submitted == []


def test_launch_again_from_a_trials_job_runs_its_configuration_with_its_parameters(
    client, owner, scored
):
    """A fold's job ran with its parameters in the array's environment and params.json;
    launched again from its page, the copy is told them in its command, as the
    experiment's relaunch does, and runs on the whole data (no fold)."""
    trial = scored.trials.get(number=1)
    fold = factories.job(owner, scored.cluster, "train", trial=trial, fold=1, state="completed")
    client.force_login(owner)
    form = client.get(f"/launch/?from={fold.pk}").context["form"]
    command = form.initial["command"]
    assert command.startswith("export PORTAL_PARAMS_JSON=") and command.endswith("\ntrain")
    exports = command.split("\n")[0]  # run by bash: the hostile value arrives as data
    told = subprocess.run(
        ["bash", "-c", f'{exports}; printf "%s" "$PORTAL_PARAM_ACT"'],
        capture_output=True,
        text=True,
    )
    assert told.stdout == "=cmd|' /C calc'!A0"
    assert "FOLD" not in command
    assert form.initial["name"] == "lr sweep: trial 1 again"
    plain = factories.job(owner, scored.cluster, "echo hi")
    assert client.get(f"/launch/?from={plain.pk}").context["form"].initial["command"] == "echo hi"


def test_staff_see_an_experiment_and_its_trials_in_the_admin(client, staff, scored):
    client.force_login(staff)
    page = client.get(reverse("admin:experiments_experiment_change", args=[scored.pk]))
    assert page.status_code == 200
    assert "Stopped early by the median rule" in page.content.decode()
    assert client.get(reverse("admin:experiments_experiment_changelist")).status_code == 200


def test_a_list_of_experiments_reads_their_summaries_in_queries_flat_in_rows(
    client, owner, cluster, image, scored, django_assert_max_num_queries
):
    """Three queries for every summary on a page (a count per state, each one's best, those
    trials), whatever the experiments and trials; the best as best_of() picks it."""
    from experiments import report

    for n in range(5):
        other = factories.experiment_record(owner, cluster, image, name=f"e{n}", goal="minimize")
        for t, value in enumerate([0.3, 0.1, 0.1, None]):
            Trial.objects.create(
                experiment=other,
                number=t,
                params={"lr": 0.1, "act": "relu"},
                state="completed" if value is not None else "running",
                value=value,
            )
    experiments = list(Experiment.objects.select_related("owner", "cluster").order_by("pk"))
    with django_assert_max_num_queries(3):
        rows = report.summaries(experiments)
    for experiment, row in zip(experiments, rows, strict=True):
        assert row == report.summary(experiment, list(experiment.trials.all()))
    assert rows[0]["best"]["number"] == 1  # maximised: 0.9
    assert rows[1]["best"]["number"] == 1  # minimised, a tie at 0.1: the first trial
    assert rows[1]["counts"] == {"completed": 3, "running": 1}
    assert rows[1]["trials_started"] == 4
    client.force_login(owner)
    assert client.get(reverse("experiments")).status_code == 200
    api = factories.api_client(owner)
    listed = api.get("/api/v1/experiments/").json()["results"]
    assert {r["id"]: r["best"] and r["best"]["number"] for r in listed} == {
        r["id"]: r["best"] and r["best"]["number"] for r in rows
    }


def test_importances_are_computed_once_per_set_of_completed_trials(
    client, owner, cluster, image, monkeypatch
):
    from experiments import report, search

    experiment = factories.experiment_record(owner, cluster, image)
    for n in range(6):
        Trial.objects.create(
            experiment=experiment,
            number=n,
            params={"lr": 0.01 * (n + 1), "act": "relu" if n % 2 else "tanh"},
            state="completed",
            value=0.1 * n,
        )
    calls = []
    real = search.importances
    monkeypatch.setattr(search, "importances", lambda *a: calls.append(1) or real(*a))
    client.force_login(owner)
    url = reverse("experiment-data", args=[experiment.pk])
    first = client.get(url).json()["importances"]
    assert set(first) == {"lr", "act"}
    assert client.get(url).json()["importances"] == first
    assert len(calls) == 1  # the second read came from the cache
    Trial.objects.create(
        experiment=experiment, number=6, params={"lr": 0.5, "act": "relu"}, state="running"
    )
    client.get(url)
    assert len(calls) == 1  # a running trial changes nothing they are computed from
    Trial.objects.filter(experiment=experiment, number=6).update(state="completed", value=0.9)
    client.get(url)
    assert len(calls) == 2
    assert (
        report.importances(experiment, list(experiment.trials.all()))
        == client.get(url).json()["importances"]
    )
