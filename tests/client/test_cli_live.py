"""The `portal` command against a real portal: pytest-django's live server (real HTTP,
the real API and database). The Slurm side is not here: submissions are caught at the
Celery boundary, and the end-to-end run on the dev cluster is in
tests/e2e/test_cli.py."""

import http.server
import json
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.db import connection

from catalog.models import ContainerImage
from clusters import files
from identity.tokens import ApiToken
from jobs.models import Job
from portal_client import cli
from proxy.models import SessionLink
from tests import factories
from tests.livestack import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def portal_env(live_server, owner, catalog, monkeypatch, tmp_path):
    _, token = ApiToken.issue(owner, "cli")
    monkeypatch.setenv("PORTAL_URL", live_server.url)
    monkeypatch.setenv("PORTAL_TOKEN", token)
    monkeypatch.setenv("PORTAL_CONFIG", str(tmp_path / "absent.toml"))
    monkeypatch.delenv("PORTAL_CA_BUNDLE", raising=False)
    return {"url": live_server.url, "token": token}


@pytest.fixture
def submitted(monkeypatch):
    """Submissions and cancellations reach the Celery boundary and stop there."""
    from jobs import tasks

    sent = []
    monkeypatch.setattr(tasks.submit_job, "delay", lambda *a: sent.append(("submit", *a)))
    monkeypatch.setattr(tasks.cancel_job, "delay", lambda *a: sent.append(("cancel", *a)))
    return sent


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_submit_prints_the_id_and_takes_the_catalogs_defaults(portal_env, submitted, capsys):
    code, out, err = run(
        capsys,
        "submit",
        "--gpus",
        "2",
        "--time",
        "2h",
        "--",
        "python",
        "train.py",
        "--name",
        "my run",
    )
    job = Job.objects.get()
    assert code == 0 and out.strip() == str(job.pk) and err == ""
    assert submitted == [("submit", job.pk)]
    assert (job.image.slug, job.cluster.name, job.partition.name) == (
        "python",
        "testcluster",
        "gpu",
    )
    # Any GPU type unless one is asked for (or what the work needs).
    assert (job.gpus, job.gpu_type, job.time_limit_minutes, job.kind) == (2, "", 120, "batch")
    assert shlex.split(job.command) == ["python", "train.py", "--name", "my run"]


def test_submit_without_a_cluster_goes_where_the_portal_decides(
    portal_env, owner, catalog, submitted, capsys
):
    """`portal submit` names no cluster: the admin's default, else the user's last."""
    first = factories.cluster("acluster", scheduler="htcondor")
    factories.partition(first, "cpu", is_default=True)
    factories.account(first, owner, "alice")
    assert run(capsys, "submit", "--", "echo", "hi")[0] == 0
    assert Job.objects.latest("pk").cluster.name == "acluster"  # the first by name
    assert run(capsys, "submit", "--cluster", "testcluster", "--", "echo", "hi")[0] == 0
    assert run(capsys, "submit", "--", "echo", "hi")[0] == 0
    assert Job.objects.latest("pk").cluster.name == "testcluster"  # the last one used
    first.mark_default()
    assert run(capsys, "submit", "--", "echo", "hi")[0] == 0
    assert Job.objects.latest("pk").cluster.name == "acluster"  # the admin's default


def test_submit_without_a_command_runs_the_images_own(portal_env, submitted, capsys):
    assert run(capsys, "submit")[0] == 0
    assert Job.objects.get().command == "python train.py"


@pytest.mark.parametrize("folder", ["runs/mnist", ""])
def test_submit_tensorboard_starts_a_session_on_the_folder(portal_env, submitted, capsys, folder):
    ContainerImage.objects.filter(slug="python").update(offers_tensorboard=True)
    assert run(capsys, "submit", "--tensorboard", folder)[0] == 0
    job = Job.objects.get()
    assert (job.kind, job.notebook_dir, job.gpus, job.command) == ("tensorboard", folder, 0, "")
    code, _, err = run(capsys, "submit", "--tensorboard", "runs", "--", "python", "x.py")
    assert code == 1 and "runs no command" in err


@pytest.mark.parametrize(
    ("args", "folder"), [(["--vscode"], ""), (["--vscode", "src/app"], "src/app")]
)
def test_submit_vscode_opens_an_editor_on_the_folder(portal_env, submitted, capsys, args, folder):
    ContainerImage.objects.filter(slug="python").update(offers_vscode=True)
    assert run(capsys, "submit", *args, "--partition", "cpu")[0] == 0
    job = Job.objects.get()
    assert (job.kind, job.notebook_dir, job.command) == ("vscode", folder, "")
    code, _, err = run(capsys, "submit", "--vscode", "--notebook")
    assert code == 1 and "one of --notebook, --tensorboard, --vscode and --app" in err


def test_submit_app_passes_each_value_as_typed_and_lists_the_apps(portal_env, submitted, capsys):
    factories.session_app(image=ContainerImage.objects.get(slug="python"))
    code, out, _ = run(capsys, "apps")
    assert code == 0 and "echo" in out and "message:text" in out
    hostile = "$(id); x=1"
    assert run(capsys, "submit", "--app", "echo", "--set", f"message={hostile}")[0] == 0
    job = Job.objects.get()
    assert (job.kind, job.app.slug, job.app_values) == ("app", "echo", {"message": hostile})
    code, _, err = run(capsys, "submit", "--app", "echo", "--set", "nope=1")
    assert code == 1 and "no field 'nope'" in err
    code, _, err = run(capsys, "submit", "--set", "message=x")
    assert code == 1 and "use it with --app" in err


def test_refused_submission_shows_each_fields_message_and_creates_nothing(
    portal_env, submitted, capsys
):
    code, out, err = run(
        capsys, "submit", "--partition", "cpu", "--gpus", "2", "--mem", "999", "--", "true"
    )
    assert code == 1 and out == ""
    assert "refused the request (HTTP 400): Please correct: gpus, memory_gb.\n" in err
    assert "\n  gpus: " in err and "\n  memory_gb: " in err
    code, _, err = run(capsys, "submit", "--container", "nope", "--", "true")
    assert code == 1 and "container:" in err
    assert not Job.objects.exists() and submitted == []


def test_jobs_show_and_cancel_own_jobs_only(
    portal_env, owner, outsider, catalog, submitted, capsys
):
    mine = factories.training_job(owner, catalog, state="running")
    theirs = factories.training_job(outsider, catalog, state="running")
    code, out, _ = run(capsys, "jobs")
    assert code == 0 and f"\n{mine.pk} " in out and f"\n{theirs.pk} " not in out
    code, out, _ = run(capsys, "show", str(mine.pk))
    assert code == 0 and re.search(r"^State: +Running$", out, re.M) and "python train.py" in out
    for argv in (["show", str(theirs.pk)], ["cancel", str(theirs.pk)], ["logs", str(theirs.pk)]):
        code, out, err = run(capsys, *argv)
        assert code == 1 and f"No job {theirs.pk}: it does not exist or is not yours." in err
    code, out, _ = run(capsys, "cancel", str(mine.pk))
    assert (
        code == 0 and "cancelling" in out and ("cancel", mine.pk, owner.pk) in submitted
    )  # owner asked
    theirs.refresh_from_db()
    assert theirs.cancel_requested_at is None
    mine.transition("cancelled")
    assert "already ended" in run(capsys, "cancel", str(mine.pk))[1]


def test_jobs_leaves_experiments_trials_out_unless_asked(portal_env, owner, catalog, capsys):
    from experiments.models import Trial

    experiment = factories.experiment_record(owner, catalog)
    trial = Trial.objects.create(experiment=experiment, number=0, params={"lr": 0.1})
    fold = factories.job(owner, catalog, "train", trial=trial, fold=0)
    mine = factories.training_job(owner, catalog, state="running")
    code, out, _ = run(capsys, "jobs")
    assert code == 0 and f"\n{mine.pk} " in out and f"\n{fold.pk} " not in out
    for argv in (["jobs", "--trials"], ["jobs", "--experiment", str(experiment.pk)]):
        code, out, _ = run(capsys, *argv)
        assert code == 0 and f"\n{fold.pk} " in out
    code, out, _ = run(capsys, "jobs", "--experiment", str(experiment.pk))
    assert f"\n{mine.pk} " not in out


def test_json_output_is_the_apis(portal_env, owner, catalog, capsys):
    import json

    job = factories.training_job(owner, catalog)
    code, out, _ = run(capsys, "--json", "show", str(job.pk))
    assert code == 0 and json.loads(out)["id"] == job.pk
    assert [c["slug"] for c in json.loads(run(capsys, "--json", "containers")[1])][0] == "python"


def test_wait_streams_state_changes_and_exits_with_the_jobs_code(portal_env, monkeypatch, capsys):
    """The scheduler's side is played by a thread writing the states a sync would."""
    from jobs import tasks

    def scheduler(job_id):
        def go():
            import time

            for pause, state, fields in [
                (0.2, "pending", {"pending_reason": "Resources"}),
                (0.8, "running", {"node": "node1", "pending_reason": ""}),
                (0.05, "failed", {"exit_code": 3}),  # Running is shorter than a poll
            ]:
                time.sleep(pause)
                Job.objects.get(pk=job_id).transition(state, **fields)
            connection.close()

        threading.Thread(target=go, daemon=True).start()

    monkeypatch.setattr(tasks.submit_job, "delay", scheduler)
    code, out, err = run(capsys, "submit", "--wait", "--interval", "0.3", "--", "exit 3")
    job = Job.objects.get()
    assert code == 3 and out.strip() == str(job.pk)
    lines = [line for line in err.splitlines() if line.startswith(f"job {job.pk}: ")]
    assert lines[:4] == [
        f"job {job.pk}: Queued",
        f"job {job.pk}: Pending (Resources)",
        f"job {job.pk}: Running on node1",
        f"job {job.pk}: Failed on node1",
    ]


def finish_in_a_thread(final_state, **fields):
    """Plays the scheduler for `submit --wait`: the job runs, then ends as a sync would
    record it."""

    def scheduler(job_id):
        def go():
            import time

            for state, more in [("running", {"node": "node1"}), (final_state, fields)]:
                time.sleep(0.2)
                Job.objects.get(pk=job_id).transition(state, **more)
            connection.close()

        threading.Thread(target=go, daemon=True).start()

    return scheduler


@pytest.mark.parametrize(("state", "exit_code", "status"), [("failed", 3, 3), ("completed", 0, 0)])
def test_wait_logs_prints_the_output_and_a_failed_jobs_stderr(
    portal_env, monkeypatch, capsys, state, exit_code, status
):
    """--logs after --wait: the end of stdout on stdout (after the id) and, when the job
    failed, the end of stderr on stderr, each through the API's bounded log read (the SFTP
    read under it is stood in for; the real one is in tests/e2e/test_cli.py)."""
    from jobs import tasks

    logs = {
        "stdout": b"".join(f"epoch {n} loss 0.{n}\n".encode() for n in range(100)),
        "stderr": b"Traceback (most recent call last):\nValueError: oops\n",
    }
    read = []

    def read_job_log(job, stream, max_bytes=None, offset=None):
        read.append(stream)
        data = logs[stream]
        start = max(0, len(data) - 64)  # the portal's size bound, made small
        return files.log_slice(data[start:], start, len(data), whole_lines=True)

    monkeypatch.setattr(files, "read_job_log", read_job_log)
    monkeypatch.setattr(tasks.submit_job, "delay", finish_in_a_thread(state, exit_code=exit_code))
    code, out, err = run(
        capsys, "submit", "--wait", "--logs", "--interval", "0.2", "--", "python train.py"
    )
    job = Job.objects.get()
    assert code == status, err
    assert out.splitlines() == [
        str(job.pk),
        "epoch 97 loss 0.97",
        "epoch 98 loss 0.98",
        "epoch 99 loss 0.99",
    ]
    tail = len("epoch 97 loss 0.97\nepoch 98 loss 0.98\nepoch 99 loss 0.99\n")
    assert (
        f"job {job.pk}: stdout, the last {tail} of {len(logs['stdout'])} bytes "
        f"(the whole file: {portal_env['url']}/jobs/{job.pk}/files/):"
    ) in err
    if state == "failed":
        assert read == ["stdout", "stderr"]
        assert err.endswith(
            f"job {job.pk}: stderr:\nTraceback (most recent call last):\nValueError: oops\n"
        )
    else:
        assert read == ["stdout"] and "stderr" not in err


def test_json_wait_logs_prints_one_document_with_the_ended_job_and_its_logs(
    portal_env, monkeypatch, capsys
):
    from jobs import tasks

    logs = {"stdout": b"accuracy 0.97\n", "stderr": b"ValueError: oops\n"}

    def read_job_log(job, stream, max_bytes=None, offset=None):
        return files.log_slice(logs[stream], 0, len(logs[stream]), whole_lines=True)

    monkeypatch.setattr(files, "read_job_log", read_job_log)
    monkeypatch.setattr(tasks.submit_job, "delay", finish_in_a_thread("failed", exit_code=3))
    code, out, _ = run(
        capsys, "--json", "submit", "--wait", "--logs", "--interval", "0.2", "--", "python t.py"
    )
    document = json.loads(out)  # the whole of stdout is one JSON document
    assert code == 3
    assert (document["state"], document["exit_code"], document["is_final"]) == ("failed", 3, True)
    assert document["logs"]["stdout"]["text"] == "accuracy 0.97\n"
    assert document["logs"]["stderr"] == {
        "text": "ValueError: oops\n",
        "size": len(logs["stderr"]),
        "truncated": False,
    }


def test_wait_logs_keeps_the_jobs_exit_code_when_its_log_cannot_be_read(
    portal_env, monkeypatch, capsys
):
    from clusters import ssh
    from jobs import tasks

    def read_job_log(job, stream, max_bytes=None, offset=None):
        raise ssh.ClusterUnreachable("connection reset")

    monkeypatch.setattr(files, "read_job_log", read_job_log)
    monkeypatch.setattr(tasks.submit_job, "delay", finish_in_a_thread("failed", exit_code=3))
    code, out, err = run(capsys, "submit", "--wait", "--logs", "--interval", "0.2", "--", "x")
    job = Job.objects.get()
    assert code == 3 and out.strip() == str(job.pk)
    assert f"job {job.pk}: its stdout could not be read (" in err and "connection reset" in err
    assert f"`portal logs {job.pk} --stderr` tries again." in err


def test_logs_follow_prints_each_byte_once_until_the_job_ends(
    portal_env, owner, catalog, monkeypatch, capsys
):
    """The API's offset reads, driven by the client; the SFTP read under them is stood in by
    a file that grows (the real one is read in tests/e2e/test_cli.py)."""
    job = factories.training_job(owner, catalog, state="running")
    content = {"data": b""}
    lines = [f"step {n} \u2713\n".encode() for n in range(30)]

    def read_job_log(job_, stream, max_bytes=None, offset=None):
        if lines:  # the job writes a line between two reads
            content["data"] += lines.pop(0)
        elif not Job.objects.get(pk=job.pk).is_final:
            Job.objects.filter(pk=job.pk).update(state="completed")
        data = content["data"]
        start = max(0, len(data) - 16) if offset is None else offset
        return files.log_slice(
            data[start : start + 7], start, len(data), whole_lines=offset is None
        )

    monkeypatch.setattr(files, "read_job_log", read_job_log)
    code, out, _ = run(capsys, "logs", "-f", "--interval", "0", str(job.pk))
    assert code == 0
    assert out == "".join(f"step {n} \u2713\n" for n in range(30))


def test_open_prints_the_session_link_of_a_running_notebook(portal_env, owner, catalog, capsys):
    batch = factories.training_job(owner, catalog)
    assert (
        "only sessions (notebook, TensorBoard, VS Code) have a link"
        in run(capsys, "open", str(batch.pk))[2]
    )
    notebook = factories.training_job(owner, catalog)
    Job.objects.filter(pk=notebook.pk).update(kind="notebook")
    session = SessionLink.for_job(notebook)
    code, _, err = run(capsys, "open", str(notebook.pk))
    assert code == 1 and "appears once the session runs" in err
    # Ready: registered from the node the job runs on.
    Job.objects.filter(pk=notebook.pk).update(state="running", node="n1")
    SessionLink.objects.filter(pk=session.pk).update(state="ready", host="n1", port=8888)
    code, out, _ = run(capsys, "open", str(notebook.pk))
    assert code == 0 and out.strip() == f"{portal_env['url']}/sessions/{session.public_id}/open/"


def test_share_list_and_withdraw_a_session_from_the_command_line(
    portal_env, owner, catalog, capsys
):
    colleague = factories.user("colleague")
    vision = factories.project(catalog, "vision", [owner, colleague])
    board = factories.training_job(owner, catalog)
    Job.objects.filter(pk=board.pk).update(kind="tensorboard", project=vision, node="n1")
    session = SessionLink.for_job(board)
    SessionLink.objects.filter(pk=session.pk).update(state="ready", host="n1", port=8888)
    code, _, err = run(capsys, "share", str(board.pk), "nobody")
    assert code == 1 and "No one in the portal is called nobody." in err
    code, out, _ = run(capsys, "share", str(board.pk), "colleague")
    assert code == 0 and out.strip() == f"job {board.pk}: shared with colleague"
    code, out, _ = run(capsys, "--json", "shares", str(board.pk))
    (share,) = json.loads(out)["shares"]
    assert (share["user"], share["kind"], share["acts_as_owner"]) == ("colleague", "person", False)
    code, out, _ = run(capsys, "unshare", str(board.pk), str(share["id"]))
    assert code == 0 and "withdrawn" in out
    code, out, _ = run(capsys, "shares", str(board.pk))
    assert out.strip() == "Not shared."
    # A notebook is shared only with --acts-as-me; a colleague never shares the owner's.
    Job.objects.filter(pk=board.pk).update(kind="notebook")
    code, _, err = run(capsys, "share", str(board.pk), "colleague")
    assert code == 1 and "acts as you" in err
    api = factories.api_client(colleague)
    refused = api.post(f"/api/v1/jobs/{board.pk}/shares/", {"people": ["colleague"]}, format="json")
    assert refused.status_code == 403


# --- clear messages for what goes wrong -----------------------------------------------


def test_a_bad_token_says_so_and_where_to_get_one(portal_env, monkeypatch, capsys):
    monkeypatch.setenv("PORTAL_TOKEN", "pp_not-a-real-token")
    code, _, err = run(capsys, "jobs")
    assert code == 1 and "did not accept the token" in err
    assert f"{portal_env['url']}/account/" in err


def test_a_revoked_token_is_refused(portal_env, capsys):
    ApiToken.objects.get().revoke()
    code, _, err = run(capsys, "jobs")
    assert code == 1 and "revoked" in err


def test_wrong_urls_say_what_is_wrong(portal_env, monkeypatch, capsys):
    monkeypatch.setenv("PORTAL_URL", f"http://127.0.0.1:{free_port()}")
    code, _, err = run(capsys, "jobs")
    assert code == 1 and "Cannot reach the portal" in err and "connection was refused" in err
    monkeypatch.setenv("PORTAL_URL", portal_env["url"] + "/some/page")
    code, _, err = run(capsys, "jobs")
    assert code == 1 and "does not look like the portal" in err and "text/html" in err


def test_a_redirect_is_reported_not_followed_with_the_token(portal_env, monkeypatch, capsys):
    seen = []

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            self.send_response(301)
            self.send_header("Location", "https://elsewhere.example/api/v1/jobs/")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("PORTAL_URL", f"http://127.0.0.1:{server.server_port}")
        code, _, err = run(capsys, "jobs")
    finally:
        server.shutdown()
    assert code == 1 and "redirects to https://elsewhere.example" in err and len(seen) == 1


def test_login_checks_the_token_before_saving_it(portal_env, monkeypatch, tmp_path, capsys):
    import io
    import os
    import stat

    path = tmp_path / "cfg" / "config.toml"
    monkeypatch.setenv("PORTAL_CONFIG", str(path))
    monkeypatch.delenv("PORTAL_TOKEN")
    monkeypatch.setattr(sys, "stdin", io.StringIO("pp_wrong\n"))
    code, _, err = run(capsys, "login", portal_env["url"], "--token-stdin")
    assert code == 1 and "did not accept the token" in err and not path.exists()
    monkeypatch.setattr(sys, "stdin", io.StringIO(portal_env["token"] + "\n"))
    code, _, err = run(capsys, "login", portal_env["url"], "--token-stdin")
    assert code == 0 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    monkeypatch.delenv("PORTAL_URL")
    assert run(capsys, "jobs")[0] == 0  # the saved file is enough


def test_the_installed_command_runs(portal_env, owner, catalog):
    """The console script `make` installs into the venv (pip install -e ./client)."""
    job = factories.training_job(owner, catalog)
    portal = Path(sys.executable).parent / "portal"
    result = subprocess.run([str(portal), "jobs"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and f"\n{job.pk} " in result.stdout, result.stderr


def test_sweep_create_list_show_cancel_from_a_yaml_file(
    portal_env, submitted, capsys, tmp_path, monkeypatch
):
    from experiments import tasks as experiment_tasks
    from experiments.models import Experiment

    monkeypatch.setattr(experiment_tasks.advance_experiment, "delay", lambda *a: None)
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: cli sweep\n"
        "launch: {container: python, partition: cpu, command: python train.py}\n"
        "parameters:\n  lr: {type: float, low: 0.001, high: 0.1, log: true}\n"
        "objective: {metric: val_loss, goal: minimize}\n"
        "budget: {max_trials: 6, max_concurrent: 2}\n"
    )
    code, out, err = run(capsys, "sweep", "create", str(spec))
    experiment = Experiment.objects.get()
    assert code == 0 and out.startswith(f"experiment {experiment.pk}: started (")
    assert experiment.spec_text == spec.read_text() and experiment.goal == "minimize"
    code, out, _ = run(capsys, "sweep", "list")
    assert code == 0 and "cli sweep" in out and "minimize val_loss" in out and "0/6" in out
    code, out, _ = run(capsys, "sweep", "show", str(experiment.pk))
    assert code == 0 and "no trials yet" in out
    code, out, _ = run(capsys, "sweep", "cancel", str(experiment.pk))
    assert code == 0 and out.strip() == f"experiment {experiment.pk}: cancelling"
    # A wrong spec: the portal's words for each field, exit status 1, nothing created.
    spec.write_text(
        "launch: {container: python}\nparameters: {lr: [1, 1]}\nobjective: {metric: a b}\n"
    )
    code, out, err = run(capsys, "sweep", "create", str(spec))
    assert code == 1 and "parameters.lr" in err and "objective.metric" in err
    assert Experiment.objects.count() == 1
    code, _, err = run(capsys, "sweep", "show", "999")
    assert code == 1 and "No experiment 999" in err


def test_submit_tags_params_then_tag_and_note_a_job(portal_env, owner, submitted, capsys):
    code, out, err = run(
        capsys,
        "submit",
        "--tag",
        "resnet",
        "--param",
        "lr=0.01",
        "--param",
        "seed=3",
        "--keep-diff",
        "--",
        "python",
        "train.py",
    )
    assert code == 0, err
    job = Job.objects.get(pk=int(out.strip()))
    assert job.tag_names == ["resnet"] and job.params == {"lr": 0.01, "seed": 3} and job.keep_diff

    code, out, err = run(capsys, "tag", str(job.pk), "add", "best", "seed=3")
    assert code == 0 and out.strip() == f"job {job.pk}: tags best resnet seed=3", err
    code, out, err = run(capsys, "tag", str(job.pk), "rm", "resnet")
    assert code == 0 and out.strip() == f"job {job.pk}: tags best seed=3"
    code, out, err = run(capsys, "note", str(job.pk), "lr too high")
    assert code == 0 and job.__class__.objects.get(pk=job.pk).notes == "lr too high"
    code, out, err = run(capsys, "tag", str(job.pk), "add", "two words")
    assert code != 0 and "tag" in err
    code, out, err = run(capsys, "show", str(job.pk))
    assert "Tags:       best seed=3" in out and "Params:     lr=0.01 seed=3" in out
    assert "Note:       lr too high" in out

    other = factories.training_job(factories.user("someone"), job.cluster)
    code, out, err = run(capsys, "note", str(other.pk), "mine")
    assert code != 0 and f"No job {other.pk}" in err
