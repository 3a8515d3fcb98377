"""Checkpoint and requeue on the real dev cluster: the demo training job, resumable, is
requeued by its time-limit warning (it checkpoints and requeues itself) and then by
`scontrol requeue` (Slurm kills it; it resumes from its last periodic checkpoint), and ends
with the same weights as an uninterrupted run; its metrics make one continuous curve; its
runs and GPU-hours come from accounting and match sacct."""

import re
import subprocess
import time
from pathlib import Path

import pytest

from clusters import files
from jobs import tasks
from jobs.models import Job
from metrics.models import MetricPoint, MetricSeries
from tests import factories
from tests.devcluster.helpers import start_now_if_held_for_requeue, sync_until
from tracking.tail import tail_job

pytestmark = [pytest.mark.devcluster]

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy/devcluster/examples/train_digits.py"
ON_NODE = Path(__file__).resolve().parents[2] / "schedulers/on_node"
JUPYTER_PYTHON = "/opt/portal-devcluster/jupyter/bin/python"  # what train-digits runs with
ARGS = ["--epochs", "12", "--checkpoint-every", "10", "--tensorboard", ""]
FINAL = re.compile(r"final val accuracy (\S+), weights sha256 (\w+), steps (\d+)")


@pytest.fixture(autouse=True)
def queued_attempt_reads(monkeypatch):
    """No Celery worker here: the sync's accounting reads are run by the test."""
    calls = []
    monkeypatch.setattr(tasks.record_attempts, "delay", lambda *a, **k: calls.append(a))
    return calls


def uninterrupted(tmp_path) -> tuple[str, str, str]:
    """The same training in one go on this host, with the interpreter the job uses."""
    result = subprocess.run(
        [JUPYTER_PYTHON, str(EXAMPLE), *ARGS, "--delay", "0"],
        cwd=tmp_path,
        env={
            "PYTHONPATH": str(ON_NODE),
            "PORTAL_METRICS_DIR": str(tmp_path / "m"),
            "PATH": "/usr/bin:/bin",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    found = FINAL.search(result.stdout)
    assert found, result.stdout
    return found.groups()


def drive(job: Job, until, timeout: float) -> Job:
    """Sync as beat would until ``until(job)``; a requeued job that Slurm holds back for the
    credential lifetime (BeginTime, 120 s) is let go at once, as the session test does."""

    def reached(job: Job) -> bool:
        if until(job):
            return True
        assert not job.is_final, f"{job.state}: {job.message}"
        if job.state == Job.State.PENDING:
            start_now_if_held_for_requeue(job.scheduler_job_id)
        return False

    sync_until(job, reached, timeout, lambda: f"attempt {job.attempt}", interval=1)
    return job


def sacct_runs(job: Job) -> list[tuple[str, int, int]]:
    """(state, elapsed seconds, GPUs) of each run, straight from sacct -D."""
    out = subprocess.run(
        [
            "sacct",
            "-n",
            "-P",
            "-D",
            "-X",
            "-j",
            job.scheduler_job_id,
            "-o",
            "State,ElapsedRaw,AllocTRES",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    runs = []
    for line in out.splitlines():
        state, elapsed, tres = line.split("|")
        gpus = re.search(r"gres/gpu=(\d+)", tres)
        runs.append((state.split()[0], int(elapsed), int(gpus.group(1)) if gpus else 0))
    return runs


@pytest.mark.timeout(600)
@pytest.mark.django_db
def test_a_resumable_job_survives_two_requeues_with_the_same_result(devcluster, owner, tmp_path):
    devcluster.metrics_over_ssh = True
    devcluster.save()
    accuracy, digest, steps = uninterrupted(tmp_path)

    command = "train-digits " + " ".join(a or "''" for a in ARGS) + " --delay 0.5"
    job = factories.job(
        owner,
        devcluster,
        command,
        partition="gpu",
        gpus=2,
        gpu_type="v100",
        time_limit_minutes=2,
        resumable=True,
        max_attempts=5,
        checkpoint_warning_seconds=30,
    )
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert "#SBATCH --signal=B:USR2@30" in job.script and "#SBATCH --requeue" in job.script

    # 1. The time-limit warning: it checkpoints, exits, and the job requeues itself.
    job = drive(job, lambda j: j.attempt == 1 and j.state == Job.State.RUNNING, timeout=240)
    # 2. Requeued from outside (as a preemption or an admin would): no warning this time.
    # Well into the attempt, so that the third has little left to do; on a slow machine it
    # may still reach the time limit's warning and be requeued once more (counted below).
    time.sleep(20)
    subprocess.run(["scontrol", "requeue", job.scheduler_job_id], check=True)
    job = drive(job, lambda j: j.attempt == 2 and j.state == Job.State.RUNNING, timeout=120)
    job = drive(job, lambda j: j.is_final, timeout=240)
    assert job.state == Job.State.COMPLETED, job.message

    log = files.read_job_log(job, "stdout", max_bytes=1 << 20).text
    assert "the time limit is near: asking the job to checkpoint" in log
    assert "saved on request; exiting to be requeued" in log
    assert "requeueing: attempt 2 of 5 resumes from the checkpoint" in log
    resumed = [int(s) for s in re.findall(r"resuming from the checkpoint of step (\d+)", log)]
    # Each attempt resumes further on; two requeues at least (a third when the last attempt
    # was slow enough to be warned again: the same checks hold for every attempt).
    assert len(resumed) >= 2 and resumed == sorted(set(resumed)), log
    attempts = len(resumed) + 1
    # The same model as the uninterrupted run: accuracy and weights, bit for bit.
    assert FINAL.search(log).groups() == (accuracy, digest, steps), log

    messages = [e.message for e in job.events.all()]
    for attempt in range(2, attempts + 1):
        assert f"Requeued: attempt {attempt} of 5 resumes from its last checkpoint." in messages
    assert job.message == f"Completed on attempt {attempts} (requeued {attempts - 1} time(s))."

    # One continuous curve: each attempt's points up to where the next one resumed (from
    # its checkpoint) cover every step once; each later attempt starts at its resume step.
    tail_job(job, max_passes=50)
    series = {s.attempt: s for s in MetricSeries.objects.filter(job=job, key="loss")}
    assert sorted(series) == list(range(attempts))
    firsts = {
        a: min(MetricPoint.objects.filter(series=s).values_list("step", flat=True))
        for a, s in series.items()
    }
    assert [firsts[a] for a in range(1, attempts)] == resumed
    covered = []
    for a, s in sorted(series.items()):
        cut = min([firsts[b] for b in series if b > a], default=float("inf"))
        covered += [
            st
            for st in MetricPoint.objects.filter(series=s).values_list("step", flat=True)
            if st < cut
        ]
    assert sorted(covered) == list(range(int(steps)))
    # The self-requeued attempt stopped right after its checkpoint: nothing to redo. The one
    # Slurm killed ran past its last periodic checkpoint: that tail is redone, and kept.
    overlap = MetricPoint.objects.filter(series=series[1], step__gte=firsts[2]).count()
    assert 0 <= overlap <= 10

    # Every run from accounting (sacct -D), and the GPU-hours they add up to.
    tasks.record_attempts.apply(args=[[job.pk]])
    runs = list(job.attempts.order_by("number"))
    from_sacct = sacct_runs(job)
    assert [(r.scheduler_state, r.elapsed_seconds, r.gpus) for r in runs] == from_sacct
    assert [r.scheduler_state for r in runs] == ["REQUEUED"] * (attempts - 1) + ["COMPLETED"]
    assert all(r.gpus == 2 for r in runs)
    gpu_hours = sum(e * g for _, e, g in from_sacct) / 3600
    assert abs(sum(r.gpu_hours for r in runs) - gpu_hours) < 1e-9 and gpu_hours > 0
    print(
        f"resumable: final accuracy {accuracy}, weights {digest[:16]}… as uninterrupted; "
        f"resumed at steps {resumed}, {overlap} steps redone; runs (state, s, GPUs) "
        f"{from_sacct}; {gpu_hours:.4f} GPU-hours"
    )
