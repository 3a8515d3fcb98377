"""Parsers on output captured from the dev cluster's Slurm 22.05 (tests/jobs/slurm_output/)."""

import json
from pathlib import Path

import pytest

from jobs.models import Job
from jobs.slurm import parsers

OUTPUT = Path(__file__).parent / "slurm_output"


def captured(name: str) -> str:
    return (OUTPUT / name).read_text()


def test_parse_squeue_json_reads_every_state_on_captured_output():
    jobs = {
        j.scheduler_id: j for j in parsers.parse_squeue_json(captured("squeue_all.json"), "hpcuser")
    }
    assert (jobs["5"].state, jobs["5"].exit_code, jobs["5"].name) == (
        "completed",
        0,
        "portal-1-aaaa",
    )
    assert jobs["5"].comment == "portal-job-1-aaaa" and jobs["5"].node == "vm"
    assert (jobs["6"].state, jobs["6"].exit_code, jobs["6"].signal) == ("failed", 3, 0)
    assert jobs["6"].name == "run with spaces"
    assert (jobs["7"].exit_code, jobs["7"].signal) == (0, 9)  # kill -9
    assert (jobs["4"].state, jobs["4"].signal) == ("cancelled", 15)
    assert jobs["8"].state == "running" and jobs["8"].start.tzinfo is not None
    assert (jobs["12"].state, jobs["12"].reason, jobs["12"].node) == ("pending", "Priority", "")
    assert jobs["8"].user == "hpcuser"


def test_parse_squeue_json_keeps_hostile_names_and_comments_as_data():
    """Job 9 holds a newline, \\x1f and 'JobId=8 JobState=RUNNING' in its name and comment;
    hpcuser2's job 10 names job 8 with 'JobState=COMPLETED'. Neither moves a field."""
    jobs = {
        j.scheduler_id: j for j in parsers.parse_squeue_json(captured("squeue_all.json"), "hpcuser")
    }
    assert jobs["9"].name == "evil\nname\x1fx" and jobs["9"].state == "pending"
    assert jobs["9"].comment == "a\x1fb\nJobId=8 JobState=RUNNING"
    assert jobs["8"].state == "running" and jobs["8"].node == "vm"
    assert "10" not in jobs  # another user's job, although Slurm 22.05 lists it
    assert len(jobs) == 12


def test_parse_squeue_json_skips_a_bad_entry_and_keeps_the_others():
    text = json.dumps(
        {
            "jobs": [
                {"job_id": 1, "user_name": "u", "job_state": "EXPLODED", "name": "a"},
                {"job_id": "x", "user_name": "u", "job_state": "RUNNING", "name": "b"},
                "not an object",
                {"job_id": 3, "user_name": "u", "job_state": "RUNNING", "name": "c"},
            ]
        }
    )
    assert [j.scheduler_id for j in parsers.parse_squeue_json(text, "u")] == ["3"]


@pytest.mark.parametrize("text", ["", "{", '{"jobs": 3}', "[]", "[" * 100_000])
def test_parse_squeue_json_refuses_a_damaged_document(text):
    with pytest.raises(parsers.Unparsable):
        parsers.parse_squeue_json(text, "u")


def test_parse_squeue_json_reads_the_23_02_shapes():
    # Shapes from Slurm 23.02+'s OpenAPI v0.0.39 schema: lists of states, set/number objects.
    text = json.dumps(
        {
            "jobs": [
                {
                    "job_id": 7,
                    "user_name": "u",
                    "name": "n",
                    "job_state": ["FAILED"],
                    "start_time": {"set": True, "infinite": False, "number": 1795346742},
                    "end_time": {"set": False, "infinite": False, "number": 0},
                    "exit_code": {"status": ["EXITED"], "return_code": {"set": True, "number": 3}},
                }
            ]
        }
    )
    (job,) = parsers.parse_squeue_json(text, "u")
    assert (job.state, job.exit_code, job.signal, job.end) == ("failed", 3, 0, None)
    assert job.start.year == 2026


def test_match_jobs_trusts_an_id_only_under_the_expected_name():
    statuses = parsers.parse_squeue_json(captured("squeue_all.json"), "hpcuser")
    # Job 8 is ours only while it is still called portal-2-bbbb (ids are reissued).
    assert set(parsers.match_jobs(statuses, {"8": "portal-2-bbbb"})) == {"8"}
    assert parsers.match_jobs(statuses, {"8": "portal-9-reissued"}) == {}


def test_match_jobs_leaves_out_an_id_reported_twice():
    one = parsers.JobStatus("5", "RUNNING", name="n")
    two = parsers.JobStatus("5", "COMPLETED", name="n")
    assert parsers.match_jobs([one, two], {"5": "n"}) == {}


def test_parse_sacct():
    # Written from sacct(1)'s -P output.
    jobs = parsers.parse_sacct(captured("sacct_sample.txt"), "hpcuser")
    by_id = {j.scheduler_id: j for j in jobs if j.scheduler_id != "102"}
    assert by_id["103"].state == "cancelled" and by_id["103"].signal == 15
    assert by_id["104"].state == "failed" and by_id["105"].state == "timeout"
    assert "107" not in by_id  # hpcuser2's
    # The name takes the rest of the line, separator and all.
    assert by_id["106"].name == "a\x1fb"


def test_parse_sacct_a_newline_in_a_name_cannot_speak_for_another_job():
    """Job 106's name ends in a newline and a forged row for job 102 (COMPLETED on 'evil'):
    102 is then reported twice and left out, never taken as completed."""
    jobs = parsers.parse_sacct(captured("sacct_sample.txt"), "hpcuser")
    assert parsers.match_jobs(jobs, {"102": "portal-102-ab", "106": "a\x1fb"}).keys() == {"106"}


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
