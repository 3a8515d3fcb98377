"""Session apps (catalog/models/apps.py, catalog/app_command.py): commands and fields read
as hostile input, values that reach the app as literal words through a real bash, the
shipped apps, and an added app through the API and the launch page."""

import subprocess

import pytest
from django.core.exceptions import ValidationError

from catalog import app_command
from catalog.models import ContainerImage, SessionApp
from jobs.models import Job
from schedulers import jobscript
from tests import factories

HOSTILE = "$(id); echo pwned `id`\nsecond line 'quoted' \"double\" \\ * ~ {message}"


# --- commands and fields, as an admin writes them -------------------------------------------


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("", "empty"),
        ("{port}", "first word is the program"),
        ("{message} {port}", "first word is the program"),
        ("app --port 80", "exactly one of {port}"),
        ("app {port} {socket}", "exactly one of {port}"),
        ("app {port} {nope}", "names {nope}"),
        ("app {port} {", "lone brace"),
        ("app {port} }", "lone brace"),
        ("app '{port}", "quotes do not close"),
        ("app {port} \x00", "control character"),
        ("app {port} \x1b[2J", "control character"),
        ("app {port} " + "x " * 70, "at most 64 words"),
        ("app {port} " + "x" * 4000, "at most 4000 characters"),
    ],
)
def test_a_command_that_is_not_words_an_app_starts_with_is_refused(command, message):
    with pytest.raises(app_command.AppError, match=message.replace("{", r"\{")):
        app_command.split_command(command, ["message"])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "x"}, "a list"),
        ([{"name": "x"}] * 21, "a list of at most 20"),
        (["x"], "not an object"),
        ([{"name": "Bad-Name"}], "lower-case identifier"),
        ([{"name": "port"}], "not one of port"),
        ([{"name": "a"}, {"name": "a"}], "Two fields"),
        ([{"name": "a", "type": "file"}], "type is one of"),
        ([{"name": "a", "label": "x\ny"}], "one line"),
        ([{"name": "a", "type": "integer", "min": 5, "max": 1}], "min is above"),
        ([{"name": "a", "type": "integer", "min": float("nan")}], "between"),
        ([{"name": "a", "type": "integer", "max": 1e300}], "between"),
        ([{"name": "a", "type": "integer", "min": True}], "is a number"),
        ([{"name": "a", "type": "choice"}], "1 to 50 choices"),
        ([{"name": "a", "type": "choice", "choices": ["x"] * 51}], "1 to 50 choices"),
        ([{"name": "a", "type": "text", "max_length": 10**6}], "max_length is 1 to 1000"),
        ([{"name": "a", "type": "integer", "max": 3, "default": 9}], "default: .*at most 3"),
        ([{"name": "a", "evil": 1}], "no key 'evil'"),
    ],
)
def test_fields_an_admin_declares_are_checked(fields, message):
    with pytest.raises(app_command.AppError, match=message):
        app_command.parse_fields(fields)


FIELDS = app_command.parse_fields(
    [
        {"name": "message", "type": "text", "max_length": 200},
        {"name": "epochs", "type": "integer", "min": 1, "max": 100, "default": 3},
        {"name": "rate", "type": "number", "min": 0, "max": 1, "default": 0.5},
        {"name": "mode", "type": "choice", "choices": ["fast", "slow; rm -rf ~"]},
        {"name": "debug", "type": "boolean"},
    ]
)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"message": "x" * 201, "mode": "fast"}, "at most 200 characters"),
        ({"message": "a\x00b", "mode": "fast"}, "control character"),
        ({"message": "a\x1bb", "mode": "fast"}, "control character"),
        ({"message": 5, "mode": "fast"}, "is text"),
        ({"message": "m", "mode": "fast", "epochs": 101}, "at most 100"),
        ({"message": "m", "mode": "fast", "epochs": 2.5}, "whole number"),
        ({"message": "m", "mode": "fast", "epochs": "1e400"}, "is a number"),
        ({"message": "m", "mode": "fast", "epochs": "9" * 40}, "is a number"),
        ({"message": "m", "mode": "fast", "rate": float("inf")}, "between"),
        ({"message": "m", "mode": "fast", "rate": True}, "is a number"),
        ({"message": "m", "mode": "medium"}, "is one of"),
        ({"message": "m", "mode": "fast", "debug": "yes"}, "true or false"),
        ({"message": "m", "mode": "fast", "other": "x"}, "no field 'other'"),
        ({"mode": "fast"}, "a value is needed"),
        (["message"], "an object"),
    ],
)
def test_a_persons_values_are_checked_against_the_fields(values, message):
    with pytest.raises(app_command.AppError, match=message):
        app_command.clean_values(FIELDS, values)


def test_values_are_cleaned_once_and_stay_the_same_when_cleaned_again():
    values = app_command.clean_values(
        FIELDS, {"message": HOSTILE, "mode": "slow; rm -rf ~", "epochs": "7", "debug": True}
    )
    assert values == {
        "message": HOSTILE,
        "epochs": "7",
        "rate": "0.5",
        "mode": "slow; rm -rf ~",
        "debug": "true",
    }
    assert app_command.clean_values(FIELDS, values) == values


def test_each_value_reaches_the_program_as_one_literal_word_through_bash(tmp_path):
    # The rendered command and environment run by a real bash, as the job script runs
    # them: the program prints its arguments and PORTAL_APP_* as NUL-separated words.
    command = (
        "printf '%s\\0' {port} {message} --mode={mode} {{braces}} 'two words' {epochs} {folder}"
    )
    parsed = app_command.split_command(command, [f.name for f in FIELDS])
    values = app_command.clean_values(FIELDS, {"message": HOSTILE, "mode": "slow; rm -rf ~"})
    script = (
        "_portal_app_port=4242\n_portal_folder='/home/a b'\n"
        + app_command.environment(FIELDS, values)
        + app_command.render(parsed, values)
        + '\nprintf \'%s\\0\' "$PORTAL_APP_MESSAGE" "$PORTAL_APP_MODE"\n'
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, cwd=tmp_path, check=True)
    words = done.stdout.decode().split("\0")[:-1]
    assert words == [
        "4242",
        HOSTILE,
        "--mode=slow; rm -rf ~",
        "{braces}",
        "two words",
        "3",
        "/home/a b",
        HOSTILE,
        "slow; rm -rf ~",
    ]
    assert done.stderr == b"" and not list(tmp_path.iterdir())  # nothing ran, nothing written


# --- the catalog's apps ---------------------------------------------------------------------


@pytest.mark.django_db
def test_jupyterlab_tensorboard_and_vscode_are_shipped_as_apps():
    shipped = {a.builtin: a for a in SessionApp.objects.exclude(builtin="")}
    assert set(shipped) == {"notebook", "tensorboard", "vscode"}
    assert shipped["notebook"].start_path == "/lab"
    assert shipped["tensorboard"].shareable_read_only
    vscode = shipped["vscode"]
    vscode.full_clean()
    spec = vscode.spec({})
    assert spec.program == "code-server" and spec.listens == "socket"
    assert '--socket "$_portal_socket"' in spec.command and spec.ready_path == "/healthz"
    assert not SessionApp.objects.offered().exists()  # kinds of their own, not "app"


@pytest.mark.django_db
def test_an_app_the_admin_adds_is_checked_before_it_is_saved():
    image = factories.image()
    app = SessionApp(slug="bad", name="Bad", image=image, command="{port}", fields="nope")
    with pytest.raises(ValidationError) as raised:
        app.full_clean()
    assert set(raised.value.message_dict) == {"command", "fields"}
    app = SessionApp(slug="bad", name="Bad", command="app {port}", ready_path="x", start_path="")
    with pytest.raises(ValidationError) as raised:
        app.full_clean()
    assert set(raised.value.message_dict) == {"image", "ready_path", "start_path"}
    factories.session_app()  # the factory's own app passes


@pytest.mark.django_db
def test_an_apps_job_script_runs_it_behind_the_guard_with_quoted_values(cluster, owner):
    app = factories.session_app(
        command="serve --listen {socket} --say {message} --in {folder}", socket=True
    )
    job = factories.job(
        owner, cluster, "", kind="app", image=app.image, app=app, app_values={"message": HOSTILE}
    )
    script = jobscript.render(job.describe(), "/home/alice/.portal/jobs/1-abc", header=[])
    assert '--upstream "unix:$_portal_socket"' in script and "--ready-path /" in script
    assert "export PORTAL_APP_MESSAGE='$(id); echo pwned" in script
    assert 'serve --listen "$_portal_socket" --say \'$(id); echo pwned' in script
    subprocess.run(["bash", "-n"], input=script.encode(), check=True)


# --- launching one --------------------------------------------------------------------------


@pytest.fixture
def no_broker(monkeypatch):
    from jobs import tasks

    sent = []
    monkeypatch.setattr(tasks.submit_job, "delay", lambda *a: sent.append(("submit", a)))
    return sent


@pytest.fixture
def app_api(owner, catalog):
    factories.session_app(image=ContainerImage.objects.get(slug="python"))
    return factories.api_client(owner, "test")


@pytest.mark.django_db
def test_an_app_is_launched_through_the_api_with_its_values_as_data(app_api, no_broker):
    listed = app_api.get("/api/v1/apps/").json()
    assert [a["slug"] for a in listed] == ["echo"]
    assert listed[0]["form_fields"] == [
        {
            "name": "message",
            "label": "Message",
            "type": "text",
            "default": "hello",
            "max_length": 200,
        }
    ]
    body = {"kind": "app", "app": "echo", "app_values": {"message": HOSTILE}, "container": "legacy"}
    response = app_api.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.kind, job.app.slug, job.app_values) == ("app", "echo", {"message": HOSTILE})
    assert job.image.slug == "python"  # the app's own image, whatever was asked
    assert response.json()["app_values"] == {"message": HOSTILE}
    for fields, where, message in [
        ({"app_values": {"message": "x\x00"}}, "app_values", "control character"),
        ({"app_values": {"other": 1}}, "app_values", "no field 'other'"),
        ({"app": "nope"}, "app", "Choose an app the catalog offers"),
        ({"app": None}, "app", ""),
    ]:
        body = {"kind": "app", "app": "echo", **fields}
        if body["app"] is None:
            del body["app"]
        response = app_api.post("/api/v1/jobs/", body, format="json")
        assert response.status_code == 400, response.json()
        assert message in str(response.json()["error"]["fields"][where])
    assert Job.objects.count() == 1
    SessionApp.objects.filter(slug="echo").update(enabled=False)
    response = app_api.post("/api/v1/jobs/", {"kind": "app", "app": "echo"}, format="json")
    assert response.status_code == 400
    assert app_api.get("/api/v1/apps/").json() == []


@pytest.mark.django_db
def test_a_shipped_app_turned_off_in_the_admin_is_not_launched(app_api):
    ContainerImage.objects.filter(slug="python").update(offers_vscode=True)
    SessionApp.objects.filter(builtin="vscode").update(enabled=False)
    response = app_api.post("/api/v1/jobs/", {"kind": "vscode"}, format="json")
    assert response.status_code == 400
    assert "VS Code sessions are turned off" in str(response.json()["error"]["fields"]["kind"])


@pytest.mark.django_db
def test_the_launch_page_offers_apps_with_their_fields_and_keeps_what_was_typed(
    client, owner, catalog, no_broker
):
    client.force_login(owner)
    assert b'value="app"' not in client.get("/launch/").content  # no app added yet
    factories.session_app(image=ContainerImage.objects.get(slug="python"))
    page = client.get("/launch/").content.decode()
    assert 'value="app"' in page and 'data-app-fields="echo"' in page
    assert 'name="app_field_message"' in page
    partition = catalog.partitions.get(name="cpu")
    form = {
        "kind": "app",
        "app": "echo",
        "app_field_message": HOSTILE,
        "cluster": catalog.name,
        "partition": partition.pk,
        "cpus": 1,
        "memory_gb": 1,
        "time_limit_minutes": 30,
        "gpus": 0,
        "work_dir_kind": "home",
    }
    response = client.post("/launch/", {**form, "time_limit_minutes": 10**9})
    assert response.status_code == 200  # refused: the page again, the value kept
    assert "$(id); echo pwned" in response.content.decode()
    response = client.post("/launch/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    job = Job.objects.get()
    assert (job.kind, job.app.slug, job.app_values) == ("app", "echo", {"message": HOSTILE})
    # Launch again: the app and its values as they ran.
    again = client.get(f"/launch/?from={job.pk}").content.decode()
    assert 'value="echo" selected' in again and "$(id); echo pwned" in again
    # A browser sends a textarea's lines ending in CRLF: the app gets them as typed (LF).
    client.post("/launch/", {**form, "app_field_message": "a\r\nb"})
    assert Job.objects.latest("pk").app_values == {"message": "a\nb"}
