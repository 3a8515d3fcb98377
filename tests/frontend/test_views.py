"""Pages through Django's test client: access rules, validation messages, queueing."""

import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from catalog.models import ContainerImage
from clusters.models import ClusterAccount
from jobs.models import Job
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def host_python(db):
    return factories.image("host", "Host Python", description="plain")


@pytest.fixture
def signed_in(client, owner, cluster):
    factories.account(cluster, owner, "alice")
    client.force_login(owner)
    return client


@pytest.fixture
def job(owner, cluster, host_python):
    return factories.job(
        owner, cluster, "echo hi", image=host_python, memory_gb=4, time_limit_minutes=60
    )


@pytest.fixture
def queued_tasks(monkeypatch):
    """Capture what would be sent to Celery."""
    from jobs import tasks

    sent = []
    monkeypatch.setattr(tasks.submit_job, "delay", lambda pk: sent.append(("submit", pk)))
    monkeypatch.setattr(tasks.cancel_job, "delay", lambda pk, *by: sent.append(("cancel", pk)))
    monkeypatch.setattr(tasks.release_job, "delay", lambda pk, *by: sent.append(("release", pk)))
    return sent


@pytest.mark.parametrize("url", ["/", "/launch/", "/account/", "/jobs/1/"])
def test_every_page_requires_sign_in(client, url):
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_sign_in_page_and_wrong_password(client, owner):
    response = client.post("/accounts/login/", {"username": "owner", "password": "wrong"})
    assert (
        response.status_code == 200 and "correct username and password" in response.content.decode()
    )
    response = client.post("/accounts/login/", {"username": "owner", "password": "owner-pass-123"})
    assert response.status_code == 302 and response["Location"] == "/"


def test_dashboard_empty_state(signed_in):
    body = signed_in.get("/").content.decode()
    assert "You have no jobs yet." in body and "Launch your first job" in body


def test_dashboard_filters_by_state_and_paginates(signed_in, owner, cluster, host_python):
    for n in range(25):
        factories.job(
            owner,
            cluster,
            "true",
            image=host_python,
            memory_gb=4,
            time_limit_minutes=60,
            state="completed" if n % 2 else "pending",
        )
    response = signed_in.get("/", {"state": "pending"})
    assert response.context["page"].paginator.count == 13
    response = signed_in.get("/")
    assert (
        len(response.context["page"].object_list) == 20
        and "Page 1 of 2" in response.content.decode()
    )


def test_the_dashboard_lists_experiments_trials_only_when_asked(
    signed_in, owner, cluster, django_capture_on_commit_callbacks
):
    """A sweep's 100 fold jobs would bury the user's other jobs: they are counted and
    linked, and listed with the Experiments' trials box ticked (pages keep it)."""
    from experiments.models import Trial
    from jobs.broadcast import job_payload

    experiment = factories.experiment_record(owner, cluster)
    trial = Trial.objects.create(experiment=experiment, number=0, params={"lr": 0.1})
    folds = [factories.job(owner, cluster, "train", trial=trial, fold=f) for f in range(21)]
    own = factories.job(owner, cluster, "echo mine")
    response = signed_in.get("/")
    body = response.content.decode()
    assert re.findall(r'data-job-id="(\d+)"', body) == [str(own.pk)]
    assert 'data-hidden-trials="21"' in body and "21 jobs of experiments' trials" in body
    response = signed_in.get("/", {"trials": "1"})
    assert response.context["page"].paginator.count == 22
    assert "&trials=1&page=2" in response.content.decode()
    assert "data-hidden-trials" not in response.content.decode()
    # What the live table decides by: a new trial job is inserted only when trials are shown.
    assert job_payload(folds[0])["trial_id"] == trial.pk and job_payload(own)["trial_id"] is None
    with django_capture_on_commit_callbacks(execute=True):  # listings renew on commit
        own.delete()
    body = signed_in.get("/").content.decode()
    assert "No other jobs." in body and "You have no jobs yet." not in body


def test_pending_reason_is_shown_in_plain_words(signed_in, job):
    start = timezone.now() + timedelta(minutes=30)
    Job.objects.filter(pk=job.pk).update(
        state="pending",
        pending_reason="waiting for free resources (a free GPU or node)",
        queue_position=3,
        estimated_start=start,
    )
    text = (
        "waiting for free resources (a free GPU or node); 3rd in the queue; "
        "the scheduler expects it to start at "
    )
    assert text in signed_in.get("/").content.decode()
    assert text in signed_in.get(f"/jobs/{job.pk}/").content.decode()


def test_outsider_gets_404_for_every_job_url(client, outsider, job):
    client.force_login(outsider)
    for url in [
        f"/jobs/{job.pk}/",
        f"/jobs/{job.pk}/row/",
        f"/jobs/{job.pk}/logs/stdout/",
        f"/launch/?from={job.pk}",
    ]:
        assert client.get(url).status_code == 404, url
    assert client.post(f"/jobs/{job.pk}/cancel/").status_code == 404
    assert "You have no jobs yet." in client.get("/").content.decode()


def test_staff_see_every_job(client, staff, job):
    client.force_login(staff)
    assert client.get(f"/jobs/{job.pk}/").status_code == 200
    assert f'data-job-id="{job.pk}"' in client.get("/").content.decode()


def launch_data(cluster, **overrides):
    data = {
        "image": "host",
        "kind": "batch",
        "cluster": cluster.name,
        "partition": cluster.partitions.get(name="gpu").pk,
        "gpu_type": "v100",
        "gpus": 1,
        "cpus": 2,
        "memory_gb": 8,
        "time_limit_minutes": 60,
        "account": "",
        "work_dir_kind": "home",
        "command": "python train.py",
        "name": "",
    }
    data.update(overrides)
    return data


def test_launch_creates_a_queued_job_and_queues_submission_after_commit(
    signed_in, cluster, host_python, queued_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = signed_in.post("/launch/", launch_data(cluster))
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.state == "queued" and job.gpus == 1
    assert queued_tasks == [("submit", job.pk)]


def test_a_command_typed_in_a_browser_reaches_the_job_with_unix_line_breaks(
    signed_in, cluster, host_python, queued_tasks
):
    """Browsers send a textarea's lines as CRLF; sbatch refuses scripts with DOS breaks."""
    signed_in.post("/launch/", launch_data(cluster, command="echo one\r\necho two\r\n"))
    assert Job.objects.get().command == "echo one\necho two"  # (the form strips the end)


@pytest.mark.parametrize(
    "overrides, field, text",
    [
        ({"gpus": 9}, "gpus", "at most 4 GPU"),
        ({"cpus": 99}, "cpus", "at most 32 CPUs"),
        ({"memory_gb": 999}, "memory_gb", "at most 128 GB"),
        ({"time_limit_minutes": 99999}, "time_limit_minutes", "at most 1440 minutes"),
        ({"gpu_type": "h100"}, "gpu_type", "offers GPU types"),
        ({"command": ""}, "command", "needs a command"),
        ({"image": "nope"}, "image", "Choose an image"),
        ({"account": "a;b"}, "account", "letters, digits"),
        ({"nodes": 2}, "nodes", "Partition gpu runs single-node jobs only: choose 1 node."),
        (
            {"kind": "notebook", "tasks_per_node": 2},
            "nodes",
            "runs as one process on one node",
        ),
        (
            {"launcher": "torchrun", "gpus": 2, "tasks_per_node": 1},
            "tasks_per_node",
            "ask for as many tasks per node as GPUs per node (2)",
        ),
        ({"launcher": "srun"}, "launcher", "Select a valid choice"),
    ],
)
def test_launch_shows_field_errors_and_keeps_the_input(
    signed_in, cluster, host_python, queued_tasks, overrides, field, text
):
    response = signed_in.post("/launch/", launch_data(cluster, **overrides))
    assert response.status_code == 200
    assert text in " ".join(response.context["form"].errors[field])
    if "command" not in overrides:  # nothing typed is lost
        assert ">\npython train.py</textarea>" in response.content.decode()
    assert not Job.objects.exists() and not queued_tasks


def test_launch_without_a_cluster_account_says_where_to_get_one(
    client, outsider, cluster, host_python, queued_tasks
):
    client.force_login(outsider)
    response = client.post("/launch/", launch_data(cluster))
    assert "no account on testcluster yet" in " ".join(response.context["form"].errors["cluster"])


def test_deprecated_images_are_offered_marked_and_last_disabled_ones_not(
    signed_in, cluster, host_python
):
    factories.image(
        "old", "Old stack", deprecated=True, sort_order=0, deprecation_note="Use Host Python."
    )
    factories.image("gone", "Gone", enabled=False)
    response = signed_in.get("/launch/")
    body = response.content.decode()
    assert "Gone" not in body
    assert body.index("Host Python") < body.index("Old stack")
    assert '<span class="tag deprecated">deprecated</span>' in body
    assert 'data-deprecation="Old stack is deprecated: Use Host Python."' in body
    # The default image is never a deprecated one, even when it sorts first.
    assert response.context["form"].initial["image"] == "host"


def test_launching_a_deprecated_image_works_with_a_warning(signed_in, cluster, host_python):
    host_python.deprecated = True
    host_python.save()
    response = signed_in.post("/launch/", launch_data(cluster), follow=True)
    job = Job.objects.get()
    assert job.image == host_python
    texts = [str(m) for m in response.context["messages"]]
    assert (
        "Host Python is deprecated: it still runs, but may be removed; prefer a newer image."
        in texts
    )


def test_launch_again_of_a_disabled_image_says_so_where_the_image_is_chosen(
    signed_in, job, host_python
):
    host_python.enabled = False
    host_python.save()
    body = signed_in.get(f"/launch/?from={job.pk}").content.decode()
    assert (
        f"Job {job.pk} ran Host Python, which the administrators have disabled: choose another "
        "image; everything else is as it was." in body
    )
    assert "alert(" not in body


def test_launch_defaults_work_without_changes(signed_in, cluster, host_python):
    form = signed_in.get("/launch/").context["form"]
    assert (
        form.initial["image"] == "host"
        and form.initial["gpus"] == 1
        and form.initial["kind"] == "notebook"
    )
    limits = json.loads(
        signed_in.get("/launch/")
        .content.decode()
        .split('id="partition-limits" type="application/json">')[1]
        .split("</script>")[0]
    )
    assert {p["name"] for p in limits["testcluster"]["partitions"]} == {"gpu", "cpu"}


def test_the_launch_page_speaks_each_schedulers_words_and_names_no_readme(
    signed_in, owner, cluster, host_python
):
    """The account field as the preselected cluster's scheduler calls it, each cluster's
    words for the page's script to switch to, and no pointer to the README anywhere."""
    pool = factories.cluster("acondorpool", scheduler="htcondor")
    factories.partition(pool, "cpu", is_default=True)
    factories.account(pool, owner, "alice")
    body = signed_in.get("/launch/").content.decode()
    assert '<label for="id_account">Accounting group</label>' in body  # first by name
    limits = json.loads(
        body.split('id="partition-limits" type="application/json">')[1].split("</script>")[0]
    )
    slurm, condor = limits["testcluster"]["capabilities"], limits["acondorpool"]["capabilities"]
    assert (slurm["account_label"], condor["account_label"]) == (
        "Slurm account",
        "Accounting group",
    )
    assert slurm["launch_note"] == "" and "one process on one machine" in condor["launch_note"]
    cluster.mark_default()
    body = signed_in.get("/launch/").content.decode()
    assert '<label for="id_account">Slurm account</label>' in body
    assert signed_in.get("/launch/").context["form"].initial["cluster"] == "testcluster"
    for page in (body, signed_in.get("/experiments/").content.decode()):
        assert "README" not in page


def test_no_help_text_a_person_reads_names_the_readme():
    """Model fields (the admin's forms, the launch form) and the API's request fields (its
    schema): each says what is needed itself."""
    from django.apps import apps

    from jobs.launch.request import LaunchRequest

    texts = [
        (f"{model.__name__}.{field.name}", str(getattr(field, "help_text", "")))
        for model in apps.get_models()
        if model.__module__.startswith(("jobs.", "proxy.", "portal.", "frontend."))
        for field in model._meta.get_fields()
    ]
    texts += [(f"api.{n}", str(f.help_text or "")) for n, f in LaunchRequest().fields.items()]
    assert [name for name, text in texts if "README" in text] == []


def test_launch_again_prefills_the_form(signed_in, job):
    form = signed_in.get(f"/launch/?from={job.pk}").context["form"]
    assert form.initial["command"] == "echo hi" and form.initial["partition"] == job.partition_id


def test_cancel_queued_job_needs_no_worker(signed_in, job, queued_tasks):
    response = signed_in.post(f"/jobs/{job.pk}/cancel/", HTTP_ACCEPT="application/json")
    assert response.json()["message"] == f"Cancelling job {job.pk}."
    job.refresh_from_db()
    assert job.state == "cancelled" and queued_tasks == []


def test_cancel_running_job_queues_the_cancel_task(
    signed_in, job, queued_tasks, django_capture_on_commit_callbacks
):
    Job.objects.filter(pk=job.pk).update(state="running", scheduler_job_id="5")
    with django_capture_on_commit_callbacks(execute=True):
        signed_in.post(f"/jobs/{job.pk}/cancel/")
    assert queued_tasks == [("cancel", job.pk)]
    assert Job.objects.get(pk=job.pk).cancel_requested_at is not None


def test_broker_failure_keeps_the_job_queued_for_the_recovery_sweep(
    signed_in, cluster, host_python, monkeypatch, django_capture_on_commit_callbacks
):
    from jobs import tasks

    def broken(pk):
        raise ConnectionError("Redis is down")

    monkeypatch.setattr(tasks.submit_job, "delay", broken)
    with django_capture_on_commit_callbacks(execute=True):
        signed_in.post("/launch/", launch_data(cluster))
    job = Job.objects.get()
    assert job.state == "queued" and "Waiting for the portal's task queue" in job.message
    # Once the broker is back, the sweep queues it (after PORTAL_RECOVER_AFTER).
    sent = []
    monkeypatch.setattr(tasks.submit_job, "delay", lambda pk: sent.append(pk))
    Job.objects.filter(pk=job.pk).update(created_at=job.created_at - timedelta(minutes=5))
    assert tasks.recover_jobs() == {"submits": 1, "cancels": 0, "given_up": 0} and sent == [job.pk]


def test_account_page_creates_a_key_pair(client, outsider, cluster):
    client.force_login(outsider)
    response = client.post("/account/", {"cluster": cluster.pk, "username": "bob"}, follow=True)
    account = ClusterAccount.objects.get(user=outsider)
    assert (
        account.public_key.startswith("ssh-ed25519 ")
        and account.public_key in response.content.decode()
    )


def test_account_test_of_someone_elses_account_is_404(client, outsider, owner, cluster):
    account = factories.account(cluster, owner, "alice")
    client.force_login(outsider)
    assert client.post(reverse("account-test", args=[account.pk])).status_code == 404


@pytest.mark.parametrize(
    "next_url, goes_to",
    [
        ("/jobs/", "/jobs/"),
        ("https://evil.example.org/", "/"),
        ("//evil.example.org/", "/"),
        ("/\\evil.example.org/", "/"),
    ],
)
def test_cancel_goes_back_only_to_a_page_of_the_portal(signed_in, job, next_url, goes_to):
    """Before: any "next" was followed, an open redirect from a portal form."""
    response = signed_in.post(f"/jobs/{job.pk}/cancel/", {"next": next_url})
    assert response.status_code == 302 and response["Location"] == goes_to


def test_sign_in_is_throttled_per_user_name_and_says_so(client, owner, settings):
    """Before: unlimited password guesses. After PORTAL_SIGNIN_FAILURES failures even the
    right password is refused for the window, on the portal's page and the admin's."""
    import uuid

    settings.PORTAL_SIGNIN_FAILURES = 3
    owner.username = f"guessed-{uuid.uuid4().hex[:8]}"  # counts live in Redis
    owner.set_password("right-pass-123")
    owner.save()
    for _ in range(3):
        page = client.post("/accounts/login/", {"username": owner.username, "password": "no"})
        assert "correct username and password" in page.content.decode()
    page = client.post(
        "/accounts/login/", {"username": owner.username, "password": "right-pass-123"}
    )
    assert page.status_code == 200 and "Too many failed sign-ins" in page.content.decode()
    assert not client.login(username=owner.username, password="right-pass-123")
    admin = client.post("/admin/login/", {"username": owner.username, "password": "right-pass-123"})
    assert admin.status_code == 200  # refused, not redirected in


def test_a_job_slurm_holds_after_a_failed_launch_offers_release(
    signed_in, job, queued_tasks, django_capture_on_commit_callbacks
):
    from schedulers.slurm.status import reason_text

    held = reason_text("launch failed requeued held")
    Job.objects.filter(pk=job.pk).update(
        state="pending", scheduler_job_id="7", pending_reason=held, held=True
    )
    page = signed_in.get(f"/jobs/{job.pk}/").content.decode()
    assert "could not start it and Slurm holds it" in page and "Release job" in page
    with django_capture_on_commit_callbacks(execute=True):
        signed_in.post(f"/jobs/{job.pk}/release/")
    assert queued_tasks == [("release", job.pk)]
    Job.objects.filter(pk=job.pk).update(pending_reason="waiting for free resources", held=False)
    assert "Release job" not in signed_in.get(f"/jobs/{job.pk}/").content.decode()


def test_the_live_parts_of_the_job_page_follow_the_job(signed_in, job):
    """portal.js swaps in ?fragment=live when the job changes: timeline and script."""
    live = signed_in.get(f"/jobs/{job.pk}/?fragment=live").content.decode()
    assert 'data-live-part="script"' in live and "Rendered when the job is submitted" in live
    job.script, job.work_dir = (
        "#!/bin/bash\n#SBATCH --job-name=x <b>",
        "/home/alice/.portal/jobs/1-x",
    )
    job.save()
    job.transition("pending", message="submitted as Slurm job 7")
    live = signed_in.get(f"/jobs/{job.pk}/?fragment=live").content.decode()
    assert "#SBATCH --job-name=x &lt;b&gt;" in live and "submitted as Slurm job 7" in live
    page = signed_in.get(f"/jobs/{job.pk}/").content.decode()
    for part in ('data-live-part="timeline"', 'data-live-part="script"', "data-work-dir"):
        assert part in page
    from jobs.broadcast import job_payload

    assert job_payload(job)["work_dir"] == "/home/alice/.portal/jobs/1-x"


def test_a_batch_jobs_page_has_no_session_card_and_no_idle_chart_controls(signed_in, job):
    body = signed_in.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="session"' not in body
    assert '<div class="metrics-toolbar" hidden>' in body  # metrics.js shows it with a chart
    job.kind = "notebook"
    job.save()
    assert 'id="session"' in signed_in.get(f"/jobs/{job.pk}/").content.decode()


def test_a_failed_jobs_page_shows_the_end_of_its_stderr_escaped(signed_in, job):
    page = signed_in.get(f"/jobs/{job.pk}/").content.decode()
    assert "data-error-tail-box hidden" in page
    Job.objects.filter(pk=job.pk).update(state="failed")
    job.refresh_from_db()
    job.record_error_tail("ok\n<script>alert(1)</script>\nImportError: no module named torch\n")
    page = signed_in.get(f"/jobs/{job.pk}/").content.decode()
    assert "data-error-tail-box hidden" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\nImportError: no module named torch</pre>" in page


def test_the_notebook_folder_is_chosen_on_the_form_and_remembered(
    signed_in, owner, cluster, host_python, queued_tasks
):
    assert signed_in.get("/launch/").context["form"].initial["notebook_dir"] == ""
    data = launch_data(cluster, kind="notebook", command="", notebook_dir="/projects/mnist/")
    response = signed_in.post("/launch/", data)
    assert response.status_code == 302, response.context["form"].errors
    assert Job.objects.get().notebook_dir == "projects/mnist"
    # The next launch (and the API's default) starts from it.
    assert signed_in.get("/launch/").context["form"].initial["notebook_dir"] == "projects/mnist"
    refused = signed_in.post("/launch/", {**data, "notebook_dir": "../other-user"})
    assert "none starting with a dot" in " ".join(refused.context["form"].errors["notebook_dir"])


def test_tensorboard_for_a_job_starts_from_its_work_directory(
    signed_in, owner, cluster, host_python
):
    ContainerImage.objects.filter(pk=host_python.pk).update(offers_tensorboard=True)
    job = factories.job(
        owner,
        cluster,
        "train",
        partition=None,
        image=host_python,
        memory_gb=4,
        time_limit_minutes=60,
        work_dir=f"/home/alice/.portal/jobs/7-{'a' * 10}",
    )
    page = signed_in.get(f"/jobs/{job.pk}/")
    assert f'href="/launch/?tensorboard_for={job.pk}"' in page.content.decode()
    form = signed_in.get(f"/launch/?tensorboard_for={job.pk}").context["form"]
    assert form.initial["kind"] == "tensorboard"
    assert form.initial["notebook_dir"] == f".portal/jobs/7-{'a' * 10}"
    assert form.initial["gpus"] == 0 and form.initial["image"] == host_python.slug

    # A trial's job works in its array's folder: the same link opens its runs.
    from jobs.models import JobArray

    array = JobArray.objects.create(owner=owner, cluster=cluster)
    member = factories.job(
        owner,
        cluster,
        "train",
        image=host_python,
        array=array,
        array_index=2,
        work_dir=f"/home/alice/.portal/jobs/a{array.pk}-{array.uid}/2",
    )
    form = signed_in.get(f"/launch/?tensorboard_for={member.pk}").context["form"]
    folder = form.initial["notebook_dir"]
    assert folder == f".portal/jobs/a{array.pk}-{array.uid}/2"
    host_python.refresh_from_db()
    session = factories.job(
        owner, cluster, "", kind="tensorboard", image=host_python, notebook_dir=folder, save=False
    )
    session.full_clean(exclude=["uid"])  # what the form's submission checks


def test_launch_of_a_resumable_job_keeps_its_attempts_and_warning(
    signed_in, cluster, host_python, queued_tasks
):
    response = signed_in.post(
        "/launch/",
        launch_data(cluster, resumable="on", max_attempts=3, checkpoint_warning_seconds=90),
    )
    assert response.status_code == 302, response.content.decode()[-3000:]
    job = Job.objects.get()
    assert (job.resumable, job.max_attempts, job.checkpoint_warning_seconds) == (True, 3, 90)
    # Without the box ticked (the page then sends neither number): one attempt.
    signed_in.post("/launch/", launch_data(cluster))
    plain = Job.objects.exclude(pk=job.pk).get()
    assert (plain.resumable, plain.max_attempts, plain.checkpoint_warning_seconds) == (
        False,
        1,
        120,
    )
