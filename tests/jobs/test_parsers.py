"""Parsers on output captured from the dev cluster's Slurm 22.05 (tests/jobs/slurm_output/)."""

from datetime import datetime
from pathlib import Path

import pytest

from jobs.models import Job
from jobs.slurm import parsers

OUTPUT = Path(__file__).parent / "slurm_output"


def captured(name: str) -> str:
    return (OUTPUT / name).read_text()


def test_parse_squeue_reads_every_state_on_captured_output():
    jobs = parsers.parse_squeue(captured("squeue_all.txt"))
    assert jobs["8"].slurm_state == "FAILED" and jobs["8"].state == "failed"
    assert (
        jobs["9"].name == "run with spaces"
        and jobs["9"].state == "running"
        and jobs["9"].node == "vm"
    )
    assert jobs["9"].comment == "portal-job-903"
    assert (
        jobs["10"].state == "pending" and jobs["10"].reason == "Resources" and jobs["10"].node == ""
    )
    assert jobs["11"].state == "cancelled"
    assert jobs["1"].comment == ""  # (null)
    assert jobs["7"].start == datetime(2026, 11, 21, 11, 53, 45)


def test_parse_squeue_refuses_lines_it_does_not_understand():
    with pytest.raises(ValueError, match="unexpected squeue line"):
        parsers.parse_squeue("12\x1fRUNNING\n")


def test_parse_scontrol_reads_exit_codes_and_names():
    jobs = parsers.parse_scontrol_jobs(captured("scontrol_show_job.txt"))
    assert (jobs["8"].state, jobs["8"].exit_code, jobs["8"].signal) == ("failed", 3, 0)
    assert jobs["9"].name == "run with spaces"
    assert jobs["10"].comment == "portal-job-904"
    assert jobs["11"].state == "cancelled" and jobs["11"].restarts == 0
    assert jobs["7"].exit_code == 0 and jobs["7"].end == datetime(2026, 11, 21, 11, 53, 45)


def test_parse_sacct():
    # Written from sacct(1)'s -P output: the dev cluster has no accounting to capture from.
    jobs = parsers.parse_sacct(captured("sacct_sample.txt"))
    assert (jobs["102"].state, jobs["102"].exit_code) == ("failed", 3)
    assert jobs["103"].state == "cancelled" and jobs["103"].signal == 15
    assert jobs["104"].state == "failed" and jobs["105"].state == "timeout"


def test_accounting_disabled_is_recognised_on_captured_stderr():
    assert parsers.accounting_disabled(captured("sacct_disabled.stderr"))


@pytest.mark.parametrize(
    "slurm, portal",
    [
        ("PENDING", "pending"),
        ("CONFIGURING", "pending"),
        ("RUNNING", "running"),
        ("COMPLETING", "completing"),
        ("COMPLETED", "completed"),
        ("FAILED", "failed"),
        ("CANCELLED", "cancelled"),
        ("CANCELLED by 1001", "cancelled"),
        ("TIMEOUT", "timeout"),
        ("NODE_FAIL", "failed"),
        ("PREEMPTED", "failed"),
        ("OUT_OF_MEMORY", "failed"),
        ("BOOT_FAIL", "failed"),
        ("DEADLINE", "timeout"),
        ("REQUEUED", "pending"),
        ("SUSPENDED", "pending"),
    ],
)
def test_every_slurm_state_in_the_issue_maps_onto_the_portal_vocabulary(slurm, portal):
    assert parsers.map_state(slurm) == portal
    assert portal in Job.State.values


def test_state_map_targets_only_portal_states():
    assert set(parsers.STATE_MAP.values()) <= set(Job.State.values)


def test_unknown_state_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match="unknown Slurm job state"):
        parsers.map_state("EXPLODED")


def test_exit_codes():
    assert parsers.parse_exit_code("3:0") == (3, 0)
    assert parsers.parse_exit_code("0:9") == (0, 9)
    assert parsers.parse_exit_code("") == (None, None)


def test_sbatch_output():
    assert parsers.parse_sbatch("1234\n") == "1234"
    assert parsers.parse_sbatch("1234;cluster2\n") == "1234"
    with pytest.raises(ValueError):
        parsers.parse_sbatch("sbatch: error: nope")


def test_reason_text_in_plain_words():
    assert parsers.reason_text("Resources") == "waiting for free resources (a free GPU or node)"
    assert parsers.reason_text("None") == ""
    assert parsers.reason_text("SomethingNew") == "SomethingNew"


@pytest.mark.parametrize(
    "stderr, transient",
    [
        (
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
            True,
        ),
        ("squeue: error: slurm_load_jobs error: Socket timed out on send/recv operation", True),
        ("sbatch: error: invalid partition specified: nope", False),
        (
            "sbatch: error: Batch job submission failed: Requested node configuration is not available",
            False,
        ),
    ],
)
def test_transient_scheduler_errors(stderr, transient):
    assert parsers.is_transient(stderr) is transient
