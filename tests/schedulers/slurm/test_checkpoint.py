"""Checkpoint and requeue: the directives, the checks, and the rendered wrapper's protocol run
by bash on this machine (the warning is sent by hand; `scontrol` is a stand-in that records
its arguments). The same script on the real cluster: tests/devcluster/test_resumable.py."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from common.choices import Kind
from schedulers.seam import JobSpec
from schedulers.slurm import scripts
from tests import factories, polling

ON_NODE = Path(scripts.__file__).resolve().parents[1] / "on_node"

# A training loop as the README shows it: checks should_checkpoint() every step, saves
# (checkpoint_saved) and exits when asked, resumes from resume_step(). With IGNORE it never
# looks; with FINISH it ends at once, exit 0, without saving; with CRASH it exits 3.
TRAIN = r"""
import os, sys, time
import portal_metrics as pm
mode = sys.argv[1]
start = pm.resume_step() or 0
print(f"start {start} attempt {pm.attempt()}", flush=True)
open(os.path.join(os.environ["PORTAL_WORK_DIR"], "started"), "w").close()
for step in range(start, start + 10_000):
    time.sleep(0.05)
    if mode == "save" and pm.should_checkpoint():
        pm.checkpoint_saved(step)
        print(f"saved {step}", flush=True)
        sys.exit(0)
    if mode == "finish" and pm.should_checkpoint():
        sys.exit(0)
    if mode == "crash" and pm.should_checkpoint():
        sys.exit(3)
"""


RESUMABLE = {
    "resumable": True,
    "max_attempts": 3,
    "checkpoint_warning_seconds": 30,
    "time_limit_minutes": 10,
}


def resumable_job(**fields) -> JobSpec:
    return factories.spec(**RESUMABLE | fields)


def test_a_resumable_job_asks_for_the_warning_signal_and_requeue():
    script = scripts.render(resumable_job(checkpoint_warning_seconds=90), "/w")
    lines = script.splitlines()
    assert "#SBATCH --signal=B:USR2@90" in lines
    assert "#SBATCH --requeue" in lines
    assert "export PORTAL_MAX_ATTEMPTS=3" in lines
    plain = scripts.render(factories.spec(), "/w")
    assert "--signal" not in plain and "--requeue" not in plain
    assert "_portal_resumable=\n" in plain


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"kind": Kind.NOTEBOOK}, "resumable", "Only batch jobs"),
        (
            {"checkpoint_warning_seconds": 300, "time_limit_minutes": 10},
            "checkpoint_warning_seconds",
            "at most a third",
        ),
        ({"resumable": False, "max_attempts": 2}, "max_attempts", "Only a resumable job"),
    ],
)
def test_impossible_resumable_requests_are_refused_with_the_reason(
    owner, cluster, fields, field, words
):
    job = factories.job(owner, cluster, save=False, **RESUMABLE | fields)
    with pytest.raises(ValidationError) as caught:
        job.full_clean()
    assert words in " ".join(caught.value.message_dict[field])


class LocalRun:
    """The rendered script of a resumable job started by bash here, as Slurm would start it
    (SLURM_JOB_ID, SLURM_RESTART_COUNT), with `scontrol` recording its arguments."""

    def __init__(self, tmp_path: Path, job: JobSpec, restarts: int = 0, warn_at_once: bool = False):
        self.work = tmp_path / "work"
        bin_dir = tmp_path / "bin"
        self.calls = tmp_path / "scontrol.calls"
        script = tmp_path / "job.sh"
        if not script.exists():  # the first attempt; a later one runs the same script again
            self.work.mkdir()
            bin_dir.mkdir()
            (bin_dir / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {self.calls}\n')
            (bin_dir / "scontrol").chmod(0o755)
            (bin_dir / "python").symlink_to(sys.executable)
            script.write_text(scripts.render(job, str(self.work)))
        (self.work / "started").unlink(missing_ok=True)
        env = {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "SLURM_JOB_ID": "4242",
            "SLURM_RESTART_COUNT": str(restarts),
        }
        self.proc = subprocess.Popen(
            ["bash", str(script)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        if warn_at_once:  # before the command (or the handler) is there: during set-up
            time.sleep(0.01)
            self.warn()
        polling.until(self.started, 20, lambda: f"the command to start: {self.output()}", 0.05)

    def started(self) -> bool:
        if (self.work / "started").exists():
            return True
        assert self.proc.poll() is None, self.output()  # ended before its command started
        return False

    def warn(self) -> None:
        self.proc.send_signal(signal.SIGUSR2)  # what --signal=B:USR2@N sends the batch shell

    def scontrol_calls(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []

    def called_scontrol(self, timeout: float) -> None:
        polling.until(
            self.scontrol_calls, timeout, lambda: f"scontrol: {self.output()}", interval=0.1
        )

    def stop(self) -> str:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # what Slurm does after a requeue
        return self.proc.communicate(timeout=20)[0]

    def output(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        return self.proc.stdout.read() if self.proc.stdout else ""


def _train_command(mode: str, tmp_path: Path) -> str:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return f"python {path} {mode}"


def test_warned_it_saves_exits_and_requeues_itself_then_resumes_from_the_checkpoint(tmp_path):
    job = resumable_job(command=_train_command("save", tmp_path))
    run = LocalRun(tmp_path, job)
    time.sleep(0.5)
    run.warn()
    run.called_scontrol(timeout=15)
    assert run.scontrol_calls() == ["requeue 4242"]
    out = run.stop()
    assert "portal: attempt 1 of 3" in out
    assert "asking the job to checkpoint" in out
    assert "attempt 2 of 3 resumes from the checkpoint" in out
    saved = int(out.split("saved ")[1].split()[0])
    assert saved > 0
    mark = json.loads((run.work / "checkpoints" / ".portal-checkpoint.json").read_text())
    assert mark["step"] == saved and mark["attempt"] == 1

    # The next attempt: Slurm runs the same script again, with SLURM_RESTART_COUNT=1.
    resumed = LocalRun(tmp_path, job, restarts=1).stop()
    assert f"start {saved} attempt 2" in resumed


def test_a_job_that_finishes_when_warned_without_saving_completes(tmp_path):
    job = resumable_job(command=_train_command("finish", tmp_path))
    run = LocalRun(tmp_path, job)
    run.warn()
    assert run.proc.wait(timeout=15) == 0, run.output()
    assert run.scontrol_calls() == []


def test_a_job_that_ignores_the_warning_is_stopped_after_the_grace_and_requeued(tmp_path):
    job = resumable_job(command=_train_command("ignore", tmp_path))
    run = LocalRun(tmp_path, job)
    run.warn()
    run.called_scontrol(timeout=30)  # grace: 10 s for a 30 s warning
    out = run.stop()
    assert "still running 10 s after the warning" in out
    assert run.scontrol_calls() == ["requeue 4242"]


def test_the_last_attempt_saves_but_waits_for_the_time_limit(tmp_path):
    job = resumable_job(command=_train_command("save", tmp_path))
    run = LocalRun(tmp_path, job, restarts=2)  # attempt 3 of 3
    run.warn()
    saved = run.work / "checkpoints" / ".portal-saved-on-request"
    polling.until(saved.exists, 15, lambda: f"{saved}: {run.output()}", interval=0.1)
    time.sleep(1.5)
    assert run.proc.poll() is None  # the time limit ends it: TIMEOUT, not COMPLETED
    assert run.scontrol_calls() == []
    out = run.stop()
    assert "attempt 3 was the last of 3" in out


def test_a_job_that_fails_after_the_warning_fails_with_its_own_status(tmp_path):
    job = resumable_job(command=_train_command("crash", tmp_path))
    run = LocalRun(tmp_path, job)
    run.warn()
    assert run.proc.wait(timeout=15) == 3, run.output()  # not requeued, not disguised
    assert run.scontrol_calls() == []


def test_a_warning_during_set_up_is_acted_on_once_the_command_runs(tmp_path):
    job = resumable_job(command=_train_command("save", tmp_path))
    run = LocalRun(tmp_path, job, warn_at_once=True)
    run.called_scontrol(timeout=15)
    assert run.scontrol_calls() == ["requeue 4242"]
    assert "asking the job to checkpoint" in run.stop()


def test_when_the_requeue_is_refused_the_run_ends_unfinished_not_completed(tmp_path):
    job = resumable_job(command=_train_command("save", tmp_path))
    run = LocalRun(tmp_path, job)
    (tmp_path / "bin" / "scontrol").write_text("#!/bin/sh\necho refused >&2\nexit 1\n")
    run.warn()
    assert run.proc.wait(timeout=15) == 1, run.output()
    assert "scontrol requeue failed: the run ends here, unfinished" in run.output()
