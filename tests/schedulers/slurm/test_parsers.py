"""Parsers on output captured from the dev cluster's Slurm 22.05 (tests/schedulers/slurm/slurm_output/)."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from jobs.models import Job
from schedulers.seam import JobKey
from schedulers.slurm import arrays, json_fields, parsers, sinfo, status

OUTPUT = Path(__file__).parent / "slurm_output"


def captured(name: str) -> str:
    return (OUTPUT / name).read_text()


def expect(*jobs: tuple[str, str], comment: str = "") -> dict[JobKey, str]:
    """What the sync asks about: (scheduler id, name) each, with the comment to check."""
    return {JobKey(*job): comment for job in jobs}


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


def test_a_pending_job_knows_its_place_in_the_partitions_queue_and_slurms_estimate():
    """Captured: gpu has 11 (Resources) and 12 (Priority) pending behind nobody, and 9 held
    (priority 0); cpu has hpcuser2's 10. Another user's job counts in the queue."""
    jobs = {
        j.scheduler_id: j for j in parsers.parse_squeue_json(captured("squeue_all.json"), "hpcuser")
    }
    assert [jobs[i].queue_position for i in ("11", "12", "9")] == [1, 2, 3]
    assert jobs["11"].estimated_start.timestamp() == 1795347960
    assert jobs["9"].estimated_start is None  # held: Slurm has no estimate (0)
    assert jobs["8"].queue_position is None and jobs["8"].estimated_start is None  # running
    assert parsers.queue_positions(json.loads(captured("squeue_all.json"))["jobs"])[10] == 1


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        ("Resources", "waiting for free resources (a free GPU or node)"),
        (
            "QOSMaxNodePerUserLimit",
            "a limit of your quality of service holds it (Slurm: QOSMaxNodePerUserLimit)",
        ),
        ("AssocGrpMemLimit", "a limit of your account holds it (Slurm: AssocGrpMemLimit)"),
        ("SomethingNew", "waiting (Slurm: SomethingNew)"),
        ("<script>\n", "waiting (Slurm: unknown)"),
        ("None", ""),
    ],
)
def test_every_pending_reason_is_said_in_words(reason, text):
    assert status.reason_text(reason) == text


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
    with pytest.raises(json_fields.Unparsable):
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
    assert set(parsers.match_jobs(statuses, expect(("8", "portal-2-bbbb")))) == {
        ("8", "portal-2-bbbb")
    }
    assert parsers.match_jobs(statuses, expect(("8", "portal-9-reissued"))) == {}


def test_match_jobs_leaves_out_an_id_reported_twice():
    one = parsers.SlurmJob("5", "RUNNING", name="n")
    two = parsers.SlurmJob("5", "COMPLETED", name="n")
    assert parsers.match_jobs([one, two], expect(("5", "n"))) == {}


def test_parse_sacct_json_on_captured_output():
    """Real 22.05 output: job 337's name holds a \\x1f, a newline and a whole forged line
    for job 102. 337-340 were recorded before the users had associations, so accounting
    names no user for them (the name check of match_jobs guards those); 344 and 345 name
    hpcuser."""
    jobs = {
        j.scheduler_id: j for j in parsers.parse_sacct_json(captured("sacct_all.json"), "hpcuser")
    }
    assert "102" not in jobs and {"344", "345"} <= set(jobs)
    others = parsers.parse_sacct_json(captured("sacct_all.json"), "hpcuser2")
    assert not {"344", "345"} & {j.scheduler_id for j in others}
    assert jobs["337"].state == "completed" and jobs["337"].name.startswith("evil\x1fx\n102")
    assert (jobs["338"].state, jobs["338"].signal) == ("failed", 9)
    assert jobs["339"].state == "cancelled" and jobs["339"].node == "" and jobs["339"].start is None
    # 22.05's JSON reads `exit 3` as return code 0: left unknown here, taken from -P.
    assert jobs["344"].state == "failed" and jobs["344"].exit_code is None


def test_exit_codes_come_from_the_one_agreeing_text_line():
    evil = parsers.parse_sacct_json(captured("sacct_all.json"), "hpcuser")[0].name
    settled = parsers.match_jobs(
        parsers.parse_sacct_json(captured("sacct_all.json"), "hpcuser"),
        expect(("337", evil), ("344", "wrap"), ("102", "portal-102-ab")),
    )
    codes = parsers.exit_codes(captured("sacct_sample.txt"), "hpcuser", settled)
    assert codes[("344", "wrap")] == (3, 0)
    assert ("102", "portal-102-ab") not in settled  # the forged text line never becomes a job
    assert ("337", evil) not in codes  # its text line is cut by the newline: no exit code


def test_parse_sacct_text_keeps_the_name_whole_and_other_users_out():
    jobs = parsers.parse_sacct(captured("sacct_sample.txt"), "hpcuser")
    by_id = {j.scheduler_id: j for j in jobs}
    assert by_id["344"].exit_code == 3 and by_id["345"].signal == 9
    assert "340" not in by_id  # hpcuser2's
    assert by_id["337"].name == "evil\x1fx"  # the separator stays inside the name field
    # ... and the forged line after it parses as job 102: only the JSON can say it is not.
    assert by_id["102"].name == "portal-102-ab"


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
    assert status.map_state(slurm) == portal
    assert portal in Job.State.values


def test_state_map_targets_only_portal_states():
    assert set(status.STATE_MAP.values()) <= set(Job.State.values)


def test_unknown_state_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match="unknown Slurm job state"):
        status.map_state("EXPLODED")


def test_exit_codes():
    assert parsers.parse_exit_code("3:0") == (3, 0)
    assert parsers.parse_exit_code("0:9") == (0, 9)
    assert parsers.parse_exit_code("") == (None, None)


def test_sbatch_output():
    assert parsers.parse_sbatch("1234\n") == "1234"
    assert parsers.parse_sbatch("1234;cluster2\n") == "1234"
    with pytest.raises(ValueError):
        parsers.parse_sbatch("sbatch: error: nope")


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


# --- which resource a pending job waits for (sinfo --json) -----------------------------


def sinfo_with(**node_fields) -> str:
    """The dev cluster's captured sinfo answer with the node's fields changed."""
    document = json.loads(captured("sinfo.json"))
    document["nodes"][0].update(node_fields)
    return json.dumps(document)


def test_parse_sinfo_json_reads_what_the_node_has_free():
    (node,) = sinfo.parse_sinfo_json(captured("sinfo.json"))
    assert node.name == "vm" and set(node.partitions) == {"gpu", "cpu"} and node.usable
    assert (node.cpus, node.memory_mb, node.gpus) == (16, 32000, (("v100", 4),))
    busy = sinfo.parse_sinfo_json(
        sinfo_with(alloc_cpus=12, alloc_memory=24000, gres_used="gpu:v100:3(IDX:0-2)")
    )[0]
    assert (busy.cpus, busy.memory_mb, busy.free_gpus("v100"), busy.free_gpus("a100")) == (
        4,
        8000,
        1,
        0,
    )
    drained = sinfo.parse_sinfo_json(sinfo_with(state="idle", state_flags=["DRAIN"]))[0]
    assert not drained.usable


@pytest.mark.parametrize(
    ("fields", "ask", "text"),
    [
        (
            {"alloc_memory": 24000},
            (2, 16, 1, "v100"),
            "waiting for memory: 16 GB asked, 7.81 GB free (at most, on one node)",
        ),
        (
            {"gres_used": "gpu:v100:4(IDX:0-3)", "alloc_cpus": 15},
            (4, 4, 1, ""),
            "waiting for GPUs: 1 asked, 0 free; CPUs: 4 asked, 1 free (at most, on one node)",
        ),
        ({}, (2, 4, 1, "a100"), "waiting for a100 GPUs: 1 asked, 0 free (at most, on one node)"),
        (
            {"state": "down", "state_flags": []},
            (1, 1, 0, ""),
            "waiting for a node: every node of its partition is down, drained or reserved",
        ),
        ({}, (1, 1, 0, ""), "waiting for the scheduler: what it asks is free now"),
    ],
)
def test_waiting_for_names_the_short_resource(fields, ask, text):
    nodes = tuple(sinfo.parse_sinfo_json(sinfo_with(**fields)))
    assert status.waiting_for(nodes, *ask) == text


def test_waiting_for_one_node_with_everything_free_at_once():
    document = json.loads(captured("sinfo.json"))
    a, b = dict(document["nodes"][0]), dict(document["nodes"][0])
    a.update(name="a", alloc_cpus=16)  # GPUs free, no CPUs
    b.update(name="b", gres_used="gpu:v100:4(IDX:0-3)")  # CPUs free, no GPUs
    nodes = tuple(sinfo.parse_sinfo_json(json.dumps({"nodes": [a, b]})))
    assert status.waiting_for(nodes, 2, 2, 1, "v100") == (
        "waiting for one node with the CPUs, memory and GPUs it asks all free at once"
    )


def test_sinfo_that_is_not_json_is_unparsable_and_odd_nodes_are_skipped():
    with pytest.raises(json_fields.Unparsable):
        sinfo.parse_sinfo_json("sinfo: error: ...")
    nodes = sinfo.parse_sinfo_json(json.dumps({"nodes": [1, {"name": "x"}, {"cpus": "many"}]}))
    assert nodes == []


# -- job arrays (captured: `sbatch --array=0-5%2`, tasks 0 and 1 running, 2-5 throttled) --


def test_squeue_reads_running_array_tasks_and_every_throttled_task_of_the_pending_record():
    jobs = {
        j.scheduler_id: j
        for j in parsers.parse_squeue_json(captured("squeue_array.json"), "hpcuser")
    }
    assert set(jobs) == {"1_0", "1_1", "1_2", "1_3", "1_4", "1_5"}
    assert (jobs["1_0"].state, jobs["1_0"].node) == ("running", "node1")
    assert (jobs["1_4"].state, jobs["1_4"].reason) == ("pending", "JobArrayTaskLimit")
    assert (
        status.reason_text(jobs["1_4"].reason) == "waiting for other tasks of its array to finish"
    )
    assert {j.name for j in jobs.values()} == {"portal-a1-xyz"}


def test_sacct_names_array_tasks_by_array_and_task_in_json_and_text():
    settled = {
        JobKey(j.scheduler_id, j.name): j
        for j in parsers.parse_sacct_json(captured("sacct_array.json"), "hpcuser")
    }
    # The array's own record (id 1) is task 5.
    assert {key.scheduler_id for key in settled} == {"1_0", "1_3", "1_5"}
    assert {key.name for key in settled} == {"portal-a1-xyz"}
    assert settled[("1_3", "portal-a1-xyz")].state == "failed"
    codes = parsers.exit_codes(captured("sacct_array.txt"), "hpcuser", settled)
    assert codes[("1_3", "portal-a1-xyz")] == (3, 0) and codes[("1_0", "portal-a1-xyz")] == (0, 0)


@pytest.mark.parametrize(
    ("spec", "tasks"),
    [
        ("2-5%2", [2, 3, 4, 5]),
        ("7", [7]),
        ("1,3,8-12:2", [1, 3, 8, 10, 12]),
    ],
)
def test_array_task_lists(spec, tasks):
    assert arrays.array_tasks(spec) == tasks


@pytest.mark.parametrize("spec", ["", "1-", "5-2", "0-99999999", "a", "1;2", "0-4:0"])
def test_a_bad_or_huge_array_task_list_is_refused_whole(spec):
    with pytest.raises(ValueError):
        arrays.array_tasks(spec)


def test_a_pending_array_record_with_a_bad_task_list_is_skipped_not_guessed():
    document = json.loads(captured("squeue_array.json"))
    pending = next(j for j in document["jobs"] if j["array_task_string"])
    pending["array_task_string"] = "0-99999999"
    jobs = parsers.parse_squeue_json(json.dumps(document), "hpcuser")
    assert {j.scheduler_id for j in jobs} == {"1_0", "1_1"}


def test_sacct_reads_the_tasks_an_arrays_own_record_stood_for_when_cancelled_pending():
    """Captured: array 268, task 0 completed; tasks 1-4 cancelled while throttled. sacct
    asked for 268_1 says nothing; asked for 268 it gives task 0 and one record whose
    ``task`` bitmap 0x1E stands for tasks 1-4."""
    jobs = {
        j.scheduler_id: j
        for j in parsers.parse_sacct_json(captured("sacct_array_cancelled_pending.json"), "hpcuser")
    }
    assert set(jobs) == {"268_0", "268_1", "268_2", "268_3", "268_4"}
    assert jobs["268_0"].state == "completed"
    assert {jobs[f"268_{i}"].state for i in range(1, 5)} == {"cancelled"}


def test_tasks_an_arrays_ended_record_left_unnamed_end_with_it():
    """Captured (a demo sweep on the dev cluster): array 646, 5 folds at %1; task 0 ran as
    647; the experiment cancelled the rest as the next task was being started, and the
    array's own record ended CANCELLED with neither a task id nor a bitmap. Its tasks 1-4
    have no record of their own, so they ended with it (before, they stayed 'cancelling'
    and the experiment never ended)."""
    name = "portal-a35-2c337b66b9"
    statuses = parsers.parse_sacct_json(
        captured("sacct_array_cancelled_unrecorded.json"), "hpcuser"
    )
    assert {s.scheduler_id for s in statuses} == {"646_0", "646_*"}
    expected = expect(*((f"646_{i}", name) for i in range(5)))
    settled = parsers.match_jobs(statuses, expected)
    assert set(settled) == {("646_0", name)} and settled[("646_0", name)].state == "completed"
    rest = arrays.remainder_tasks(statuses, expected, settled)
    assert set(rest) == {(f"646_{i}", name) for i in range(1, 5)}
    assert {(s.scheduler_id, s.state) for s in rest.values()} == {
        (f"646_{i}", "cancelled") for i in range(1, 5)
    }
    # Only under the array's own name, only once it has ended, never over a task's own record.
    assert arrays.remainder_tasks(statuses, expect(("646_1", "portal-a99-other")), {}) == {}
    assert arrays.remainder_tasks(statuses, expect(("6460_1", name)), {}) == {}
    pending = [replace(s, slurm_state="PENDING") for s in statuses]
    assert arrays.remainder_tasks(pending, expected, settled) == {}


def test_the_sync_settles_those_tasks_from_accounting():
    """operations.accounting() with the captured answers: all five folds are final."""
    from clusters import ssh
    from schedulers.slurm import operations

    class Accounting:
        def __init__(self):
            self.asked = []

        def run(self, argv, *, stdin=None, check=True, max_bytes=None):
            self.asked.append(argv)
            if "--json" in argv:
                return ssh.Result(captured("sacct_array_cancelled_unrecorded.json"), "", 0)
            return ssh.Result("", "", 0)  # sacct -P: no line of its own for any task

    conn = Accounting()
    expected = expect(*((f"646_{i}", "portal-a35-2c337b66b9") for i in range(5)))
    found = operations.accounting(conn, "hpcuser", expected)
    assert {key.scheduler_id: s.state for key, s in found.items()} == {
        "646_0": "completed",
        **{f"646_{i}": "cancelled" for i in range(1, 5)},
    }
    assert conn.asked[0][:5] == ["sacct", "--json", "-X", "-j", "646"]


@pytest.mark.parametrize(("bitmap", "tasks"), [("0x1E", [1, 2, 3, 4]), ("0x1", [0]), ("0x0", [])])
def test_array_task_bitmaps(bitmap, tasks):
    assert arrays.bitmap_tasks(bitmap) == tasks


@pytest.mark.parametrize("bitmap", ["1E", "0xZZ", "0x" + "F" * 30000])
def test_a_bad_or_huge_bitmap_is_refused(bitmap):
    with pytest.raises(ValueError):
        arrays.bitmap_tasks(bitmap)


def test_each_run_of_a_requeued_gpu_job_with_what_it_held():
    """sacct --json -D -X of a 2-GPU job requeued once (real output, Slurm 22.05 with
    AccountingStorageTRES=gres/gpu): two runs, oldest first, GPUs and CPUs from AllocTRES."""
    from schedulers.slurm.attempts import parse_attempts

    job = expect(("2", "portal-9-abc"))
    runs = parse_attempts(captured("sacct_requeued_gpu_job.json"), "hpcuser", job)[
        ("2", "portal-9-abc")
    ]
    assert [r.scheduler_state for r in runs] == ["REQUEUED", "COMPLETED"]
    assert [(r.gpus, r.cpus, r.node) for r in runs] == [(2, 1, "node1"), (2, 1, "node1")]
    assert [r.elapsed_seconds for r in runs] == [4, 8]
    assert {r.account for r in runs} == {"portal"}  # charged to, as accounting says
    assert runs[0].ended_at <= runs[1].started_at
    # Under another name (the id reused by someone else's job) or user: nothing.
    assert (
        parse_attempts(captured("sacct_requeued_gpu_job.json"), "hpcuser", expect(("2", "x"))) == {}
    )
    assert parse_attempts(captured("sacct_requeued_gpu_job.json"), "eve", job) == {}


def test_attempt_records_that_are_odd_are_skipped_not_fatal():
    from schedulers.slurm.attempts import parse_attempts

    document = json.loads(captured("sacct_requeued_gpu_job.json"))
    document["jobs"][0]["time"] = "yesterday"  # not a mapping: no start, skipped
    document["jobs"][1]["tres"] = {"allocated": [{"type": "gres", "name": "gpu", "count": -5}]}
    runs = parse_attempts(json.dumps(document), "hpcuser", expect(("2", "portal-9-abc")))
    assert [(r.scheduler_state, r.gpus) for r in runs[("2", "portal-9-abc")]] == [("COMPLETED", 0)]


def test_every_users_jobs_carry_their_own_owner():
    """parse_squeue_json/parse_sacct_json with no user (the sync's one read of a cluster):
    each job under the owner Slurm names, the same jobs as reading user by user (a sacct
    record with no owner, as before its user had an association, counts for either)."""
    everyone = parsers.parse_squeue_json(captured("squeue_all.json"), None)
    assert {"hpcuser", "hpcuser2"} <= {job.user for job in everyone}
    for parse, name in (
        (parsers.parse_squeue_json, "squeue_all.json"),
        (parsers.parse_sacct_json, "sacct_all.json"),
    ):
        everyone = parse(captured(name), None)
        for owner in {job.user for job in everyone} - {""}:
            mine = [j.scheduler_id for j in everyone if j.user in (owner, "")]
            assert mine == [j.scheduler_id for j in parse(captured(name), owner)], name


# -- one id, two portal jobs: a controller that lost a job reissued its id --------------
#
# Job "lost" (portal-1-lost) held id 55 when slurmctld was killed; after the restart Slurm
# gave 55 to the same person's next job, "taken" (portal-2-taken). Each must get only the
# records under its own name.

LOST, TAKEN = JobKey("55", "portal-1-lost"), JobKey("55", "portal-2-taken")
BOTH = {LOST: "portal-job-1-lost", TAKEN: "portal-job-2-taken"}


def record(key: JobKey, state: str = "COMPLETED", **fields) -> parsers.SlurmJob:
    return parsers.SlurmJob(key.scheduler_id, state, name=key.name, user="hpcuser", **fields)


def test_two_jobs_with_one_id_each_get_the_record_of_their_own_name_or_none():
    taken = record(TAKEN, exit_code=0, comment=BOTH[TAKEN])
    assert parsers.match_jobs([taken], BOTH) == {TAKEN: taken}
    lost = record(LOST, "FAILED", comment=BOTH[LOST])
    assert parsers.match_jobs([lost, taken], BOTH) == {LOST: lost, TAKEN: taken}
    assert parsers.match_jobs([taken], {LOST: BOTH[LOST]}) == {}


def test_the_comment_can_refuse_a_record_but_never_make_it_a_jobs():
    """The job's comment (JobSpec.comment, what the script sets with --comment) is checked
    where the record has one; its owner can change it (scontrol update), so it only ever
    refuses: the name decides."""
    assert parsers.match_jobs([record(TAKEN, comment="portal-job-1-lost")], BOTH) == {}
    assert set(parsers.match_jobs([record(TAKEN, comment="")], BOTH)) == {TAKEN}  # sacct's
    assert set(parsers.match_jobs([record(TAKEN, comment="x")], {TAKEN: ""})) == {TAKEN}
    forged = record(JobKey("55", "portal-9-other"), comment=BOTH[LOST])
    assert parsers.match_jobs([forged], BOTH) == {}


def test_sacct_json_carries_the_comment_where_accounting_stores_it():
    """22.05 records ``{"job": null}`` unless the site sets AccountingStoreFlags=job_comment:
    no comment, so only the name is checked."""

    def comment_of_344(document) -> str:
        jobs = parsers.parse_sacct_json(json.dumps(document), "hpcuser")
        return next(j.comment for j in jobs if j.scheduler_id == "344")

    document = json.loads(captured("sacct_all.json"))
    entry = next(e for e in document["jobs"] if e["job_id"] == 344)
    assert entry["comment"] == {"administrator": None, "job": None, "system": None}
    assert comment_of_344(document) == ""
    entry["comment"]["job"] = "portal-job-7-abc"
    assert comment_of_344(document) == "portal-job-7-abc"


def test_exit_codes_of_one_id_go_to_the_job_of_the_lines_name_only():
    """``sacct -P`` answers 55 with the newest job that held it ("taken"): its code is
    taken's, never lost's; two lines for one id are nobody's."""
    taken_line = parsers.FIELD_SEP.join(
        ["55", "hpcuser", "COMPLETED", "0:0", "None", "node1", "", "", TAKEN.name]
    )
    lost_line = parsers.FIELD_SEP.join(
        ["55", "hpcuser", "FAILED", "3:0", "None", "node1", "", "", LOST.name]
    )
    settled = {LOST: record(LOST, "FAILED"), TAKEN: record(TAKEN)}
    assert parsers.exit_codes(taken_line, "hpcuser", settled) == {TAKEN: (0, 0)}
    assert parsers.exit_codes(lost_line, "hpcuser", settled) == {LOST: (3, 0)}
    assert parsers.exit_codes(f"{taken_line}\n{lost_line}", "hpcuser", settled) == {}
    assert parsers.exit_codes(taken_line, "hpcuser", {LOST: record(LOST)}) == {}


def test_an_arrays_remainder_settles_only_the_tasks_of_its_own_name():
    """Array 60 lost with the controller ("portal-a1-lost", tasks 0-2) and its id given to
    the same person's next array ("portal-a2-taken"), whose own record ended cancelled
    with tasks 1 and 2 unstarted: those tasks are the new array's, not the lost one's."""
    lost = {JobKey(f"60_{i}", "portal-a1-lost"): "" for i in range(3)}
    taken = {JobKey(f"60_{i}", "portal-a2-taken"): "" for i in range(3)}
    own = parsers.SlurmJob("60_*", "CANCELLED", name="portal-a2-taken")
    rest = arrays.remainder_tasks([own], {**lost, **taken}, {})
    assert set(rest) == set(taken)
    assert {s.scheduler_id for s in rest.values()} == {"60_0", "60_1", "60_2"}


def test_the_runs_of_one_id_are_each_recorded_for_the_job_of_their_name():
    """``sacct -D`` lists every job that held id 2: each run counts for its own name."""
    from schedulers.slurm.attempts import parse_attempts

    document = json.loads(captured("sacct_requeued_gpu_job.json"))
    first, second = document["jobs"]
    first["name"], second["name"] = "portal-1-lost", "portal-2-taken"
    first["comment"] = {"job": "portal-job-1-lost"}
    expected = {JobKey("2", "portal-1-lost"): "", JobKey("2", "portal-2-taken"): ""}
    runs = parse_attempts(json.dumps(document), "hpcuser", expected)
    assert {key.name: [r.scheduler_state for r in rs] for key, rs in runs.items()} == {
        "portal-1-lost": ["REQUEUED"],
        "portal-2-taken": ["COMPLETED"],
    }
    # A run whose comment is another job's counts for neither.
    refused = {JobKey("2", "portal-1-lost"): "portal-job-9-other"}
    assert parse_attempts(json.dumps(document), "hpcuser", refused) == {}


def test_an_ownerless_accounting_record_of_one_id_goes_to_the_job_of_its_name_only():
    """A record accounting keeps with no user (a job recorded before its user had an
    association) counts for whoever expects its id *under its name*: of hpcuser's two
    jobs holding 55, "taken"; hpcuser2's job that held 55 before, under its own name,
    nothing. Its exit code (sacct -P, user named there) is taken's too."""
    from clusters import ssh
    from schedulers.slurm import operations

    entry = {
        "job_id": 55,
        "user": None,
        "association": None,
        "name": TAKEN.name,
        "state": {"current": "COMPLETED", "reason": "None"},
        "time": {"start": 1_795_000_010, "end": 1_795_000_070},
    }
    line = parsers.FIELD_SEP.join(
        ["55", "hpcuser", "COMPLETED", "0:0", "None", "node1", "", "", TAKEN.name]
    )

    class Accounting:
        def run(self, argv, *, stdin=None, check=True, max_bytes=None):
            out = json.dumps({"jobs": [entry]}) if "--json" in argv else line
            return ssh.Result(out, "", 0)

    other = JobKey("55", "portal-3-other")
    found = operations.accounting_owners(
        Accounting(), {"hpcuser": BOTH, "hpcuser2": {other: "portal-job-3-other"}}
    )
    assert set(found["hpcuser"]) == {TAKEN} and found["hpcuser2"] == {}
    taken = found["hpcuser"][TAKEN]
    assert (taken.state, taken.exit_code) == ("completed", 0)
