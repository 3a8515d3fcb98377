"""The HTCondor adapter's pure parts, on output captured from the dev pool (minicondor
23.9): parsing as data, state mapping, and the submit description rendered from a job's
plain description (schedulers.seam.JobSpec), no database."""

import dataclasses
import json
from decimal import Decimal
from pathlib import Path

import pytest

from clusters.ssh import CommandFailed
from clusters.workdir import ScriptError
from jobs.models import Job
from schedulers.htcondor import parsers, status, submit
from schedulers.seam import ImageSpec, JobKey
from tests import factories

CAPTURED = Path(__file__).parent / "captured"


def captured(name: str) -> str:
    return (CAPTURED / name).read_text()


def by_name(jobs):
    return {j.name: j for j in jobs}


def test_condor_q_ads_become_the_users_jobs():
    jobs = by_name(parsers.parse_jobs(captured("condor_q.json"), "condor_q", "condoruser"))
    running, unmatched = jobs["portal-3-c"], jobs["portal-4-d"]
    assert running.scheduler_id == "30.0" and running.status == parsers.RUNNING
    assert running.node == "vm" and running.starts == 1 and running.started_at is not None
    assert unmatched.status == parsers.IDLE and unmatched.unmatched and unmatched.gpus == 2
    # Another user's view of the same answer: nothing of it is theirs.
    assert parsers.parse_jobs(captured("condor_q.json"), "condor_q", "someoneelse") == []


def test_states_in_the_portals_words():
    queue = by_name(parsers.parse_jobs(captured("condor_q.json"), "condor_q", "condoruser"))
    history = by_name(
        parsers.parse_jobs(captured("condor_history.json"), "condor_history", "condoruser")
    )
    held = parsers.parse_jobs(captured("condor_q_held.json"), "condor_q", "condoruser")[0]
    assert status.to_status(queue["portal-3-c"]).state == "running"
    idle = status.to_status(queue["portal-4-d"])
    assert idle.state == "pending" and idle.reason.startswith("no machine in the pool matches")
    done, three = status.to_status(history["portal-1-a"]), status.to_status(history["portal-2-b"])
    assert (done.state, done.exit_code) == ("completed", 0)
    assert (three.state, three.exit_code) == ("failed", 3)
    assert status.to_status(history["portal-7-g"]).state == "cancelled"  # condor_rm
    timeout = status.to_status(history["portal-6-f"])  # periodic_remove of PortalTimeLimit
    assert timeout.state == "timeout" and "time limit" in timeout.message
    # A hold whose reason HTCondor did not keep (null): its code in words.
    on_hold = status.to_status(held)
    assert on_hold.state == "pending" and on_hold.held and on_hold.reason.startswith("held: ")
    assert on_hold.reason == "held: held by its owner or an administrator (condor_hold)"


def test_a_job_cannot_pass_for_another_by_its_text():
    ads = [
        # A job of the same user whose name claims another portal job's id and name.
        {
            "ClusterId": 41,
            "ProcId": 0,
            "Owner": "u",
            "PortalName": "portal-9-x",
            "JobStatus": 4,
            "ExitCode": 0,
        },
        # Another user's job under the expected id and name.
        {
            "ClusterId": 40,
            "ProcId": 0,
            "Owner": "v",
            "PortalName": "portal-9-x",
            "JobStatus": 4,
            "ExitCode": 0,
        },
        {
            "ClusterId": 40,
            "ProcId": 0,
            "Owner": "u",
            "PortalName": "portal-9-x",
            "JobStatus": 2,
            "RemoteHost": "slot1@evil host; rm -rf /",
        },
    ]
    jobs = parsers.parse_jobs(json.dumps(ads), "condor_q", "u")
    key = JobKey("40.0", "portal-9-x")
    found = parsers.match_jobs(jobs, {key})
    assert list(found) == [key] and found[key].status == parsers.RUNNING
    assert found[key].node == ""  # not a host name: no node, never that text


def test_two_jobs_with_one_id_each_get_the_ad_of_their_own_name_or_none():
    """A schedd that lost its queue reissues cluster ids, to the same person even: 40.0 in
    the queue is "taken"'s; "lost" (the portal job that held 40.0 before) gets nothing, and
    an ended ad of "lost" in the history is its own."""
    lost, taken = JobKey("40.0", "portal-1-lost"), JobKey("40.0", "portal-2-taken")
    ads = [{"ClusterId": 40, "ProcId": 0, "Owner": "u", "PortalName": taken.name, "JobStatus": 4}]
    queue = parsers.parse_jobs(json.dumps(ads), "condor_q", "u")
    assert list(parsers.match_jobs(queue, {lost, taken})) == [taken]
    assert parsers.match_jobs(queue, {lost}) == {}
    ads.append({**ads[0], "PortalName": lost.name, "JobStatus": 3})
    history = parsers.parse_jobs(json.dumps(ads), "condor_history", "u")
    found = parsers.match_jobs(history, {lost, taken})
    assert {key: ad.status for key, ad in found.items()} == {
        taken: parsers.COMPLETED,
        lost: parsers.REMOVED,
    }


@pytest.mark.parametrize(
    "output",
    ["{", '{"ClusterId": 1}', "[" * 100_000, "nonsense"],
)
def test_damaged_output_is_unparsable_as_a_whole(output):
    with pytest.raises(parsers.Unparsable):
        parsers.parse_jobs(output, "condor_q", "u")


def test_odd_ads_are_skipped_and_text_is_bounded():
    ads = [
        {"ClusterId": "1", "ProcId": 0, "Owner": "u", "JobStatus": 2},  # id as text
        {"ClusterId": 2, "ProcId": 0, "Owner": "u", "JobStatus": True},  # status as bool
        {
            "ClusterId": 3,
            "ProcId": 0,
            "Owner": "u",
            "PortalName": "p",
            "JobStatus": 5,
            "HoldReason": "\x1b[31m" + "x" * 10_000,
        },
        "not an ad",
    ]
    jobs = parsers.parse_jobs(json.dumps(ads), "condor_q", "u")
    assert [j.scheduler_id for j in jobs] == ["3.0"]
    assert len(jobs[0].hold_reason) <= parsers.MAX_TEXT and "\x1b" not in jobs[0].hold_reason
    assert len(status.to_status(jobs[0]).reason) <= 200


def test_an_unknown_job_status_is_reported_not_guessed():
    job = parsers.CondorJob(scheduler_id="1.0", owner="u", name="p", status=9)
    with pytest.raises(ValueError, match="unknown HTCondor JobStatus"):
        status.to_status(job)


def test_an_empty_answer_is_no_job():
    assert parsers.parse_jobs("", "condor_q", "u") == []


# -- the submit description ---------------------------------------------------------------


@pytest.fixture
def pool(db):
    cluster = factories.cluster("pool", scheduler="htcondor")
    factories.partition(cluster, "gpu", gpu_types="v100,a100", max_gpus_per_job=2)
    factories.gpu_type(cluster, "a100", "8.0", 46)
    return cluster


def description_of(job, **kw) -> list[str]:
    return submit.description(job, "/home/u/.portal/jobs/1-x", job.name, "/home/u/x/job.sh", **kw)


def test_the_description_asks_for_what_the_job_asks():
    job = factories.spec(
        partition="gpu",
        gpus=1,
        cpus=2,
        memory_gb=3,
        time_limit_minutes=7,
        min_gpu_capability=Decimal("7.5"),
        min_gpu_memory_gb=40,
    )
    lines = description_of(job)
    assert "request_gpus = 1" in lines and "request_cpus = 2" in lines
    assert "request_memory = 3072" in lines
    assert "gpus_minimum_capability = 7.5" in lines and "gpus_minimum_memory = 40960" in lines
    assert "+PortalTimeLimit = 420" in lines
    assert f'+PortalName = "{job.name}"' in lines and lines[-1] == "queue"
    assert "should_transfer_files = NO" in lines


def test_a_named_gpu_type_is_required_by_its_model():
    """The model the admin described for the type (GpuType.model; tests/jobs/test_describe.py),
    else the type's own name."""
    job = factories.spec(partition="gpu", gpus=1, gpu_type="a100", gpu_model="A100-SXM4-40GB")
    assert 'require_gpus = DeviceName == "A100-SXM4-40GB"' in description_of(job)
    undescribed = factories.spec(partition="gpu", gpus=1, gpu_type="a100")
    assert 'require_gpus = DeviceName == "a100"' in description_of(undescribed)


def test_images_become_container_image_and_the_script_does_not_start_one():
    job = factories.spec(
        command="python train.py",
        partition="gpu",
        runtime="apptainer",
        location="/images/pytorch.sif",
        gpus=1,
    )
    text = submit.render(job, "/home/u/.portal/jobs/1-x")
    description, _, script = text.partition(f"\n{submit.SEPARATOR}\n")
    assert "container_image = /images/pytorch.sif" in description.split("\n")
    assert "apptainer exec" not in script and "python train.py" in script
    podman = ImageSpec("podman", "docker.io/tf:2")
    assert submit.container_image(podman) == "docker://docker.io/tf:2"


def test_arrays_are_one_cluster_of_procs():
    job = factories.spec(partition="gpu")
    lines = description_of(job, array_size=4)
    assert lines[-1] == "queue 4"
    assert "initialdir = /home/u/.portal/jobs/1-x/$(ProcId)" in lines
    assert any("PORTAL_ARRAY_INDEX=$(ProcId)" in line for line in lines)


@pytest.mark.parametrize(
    "field, value",
    [("account", 'x"\nqueue 1000'), ("account", "a b")],
)
def test_nothing_typed_adds_to_the_description(field, value):
    job = factories.spec(partition="gpu", **{field: value})
    with pytest.raises(ScriptError):
        description_of(job)


def test_slurm_only_requests_are_refused_on_htcondor():
    for asked in ({"nodes": 2}, {"tasks_per_node": 2}, {"launcher": "mpi"}, {"resumable": True}):
        with pytest.raises(ScriptError, match="need Slurm"):
            description_of(factories.spec(partition="gpu", **asked))


def test_held_is_what_the_adapter_said_not_a_reading_of_the_reason():
    assert Job(state="pending", held=True, pending_reason="held: disk full").is_held
    assert not Job(state="pending", pending_reason="held: disk full").is_held
    assert not Job(state="running", held=True).is_held


def test_the_launch_check_refuses_what_htcondor_cannot_run(pool, owner):
    from jobs.models import request as limits

    job = factories.job(owner, pool, partition="gpu", nodes=2, resumable=True, save=False)
    errors = limits.scheduler_errors(job, pool)
    assert "multi-node jobs and launchers need a Slurm cluster" in errors["nodes"]
    assert "checkpoint and requeue need a Slurm cluster" in errors["resumable"]
    slurm = factories.cluster("slurm")
    assert limits.scheduler_errors(job, slurm) == {}


def test_gpu_devices_from_condor_status_describe_the_pools_gpu_types(pool):
    from clusters.models.gpus import record_devices

    devices = parsers.parse_gpu_devices(captured("condor_status.json"))
    assert {(d.name, d.capability, d.memory_mb) for d in devices} == {
        ("Tesla V100-PCIE-16GB", "7.0", 24220),
        ("A100-SXM4-40GB", "8.0", 47661),
    }
    report = record_devices(pool, devices)
    described = {
        t.name: (t.model, str(t.compute_capability), t.memory_gb) for t in pool.gpu_types.all()
    }
    assert described["v100"] == ("Tesla V100-PCIE-16GB", "7.0", 23)
    assert described["a100"] == ("A100-SXM4-40GB", "8.0", 46)
    assert any("a100: updated" in line for line in report)  # the fixture described it
    assert pool.partitions.get(name="gpu").gpu_type_list == ["v100", "a100"]
    # Hostile or odd device ads are left out, not guessed.
    odd = json.dumps(
        [
            {
                "Machine": "m",
                "GPUs_GPU_x": {"DeviceName": "x", "Capability": True, "GlobalMemoryMb": 1},
            },
            {"Machine": "m", "GPUs_GPU_y": {"DeviceName": "y\\n;rm", "Capability": 8.0}},
        ]
    )
    assert parsers.parse_gpu_devices(odd) == []


# -- the submit step's shell, run here against stand-in HTCondor commands ---------------------


class LocalConnection:
    """Runs the step's argv on this machine, as the access point's shell would, with
    ``bin`` first on PATH (stand-ins for condor_q, condor_history, condor_submit)."""

    def __init__(self, bin_dir: Path):
        self.bin_dir = bin_dir

    def run(self, argv, *, stdin=None, check=True, max_bytes=None):
        import os
        import subprocess

        from clusters import ssh

        env = {**os.environ, "PATH": f"{self.bin_dir}:/usr/bin:/bin"}
        done = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, env=env, timeout=30
        )
        if check and done.returncode:
            raise ssh.CommandFailed(
                done.stderr.strip(), stderr=done.stderr, exit_status=done.returncode
            )
        return ssh.Result(done.stdout, done.stderr, done.returncode)


def stand_ins(tmp_path, **scripts) -> LocalConnection:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    (tmp_path / "submitted").write_text("")
    return LocalConnection(bin_dir)


SUBMITTED = submit.combined(["queue"], "#!/bin/bash\necho hi\n")


def test_a_query_that_fails_submits_nothing_and_is_retried(tmp_path):
    from schedulers.htcondor import operations

    conn = stand_ins(
        tmp_path,
        condor_q="echo 'Failed to fetch ads from: <127.0.0.1:9618> : vm' >&2; exit 1",
        condor_history="exit 0",
        condor_submit=f"echo x >> {tmp_path}/submitted; echo '5.0 - 5.0'",
    )
    with pytest.raises(operations.SchedulerUnavailable, match="did not answer"):
        operations.submit(conn, str(tmp_path / "w"), "portal-1-a", SUBMITTED)
    assert (tmp_path / "submitted").read_text() == ""  # never submitted blind


def test_the_cluster_id_comes_from_the_terse_line_only(tmp_path):
    from schedulers.htcondor import operations

    conn = stand_ins(
        tmp_path,
        condor_q="exit 0",
        condor_history="exit 0",
        condor_submit="echo \"WARNING: the line 'gpus_minimum_memory = 16384' was unused\"; echo '12.0 - 12.3'",
    )
    first = operations.submit_array(conn, str(tmp_path / "w"), "portal-a1-b", SUBMITTED, [(0, "t")])
    assert (first.scheduler_id, first.adopted) == ("12", False)
    again = operations.submit_array(conn, str(tmp_path / "w"), "portal-a1-b", SUBMITTED, [(0, "t")])
    assert (again.scheduler_id, again.adopted) == ("12", True)  # the recorded id
    assert (tmp_path / "w" / "job.sub").read_text() == "queue\n"
    assert (tmp_path / "w" / "job.sh").read_text() == "#!/bin/bash\necho hi\n"


@pytest.mark.parametrize("answer", ["12.0 - 13.0", "12.0 - 12.x", "Submitting job(s).", ""])
def test_an_answer_without_a_terse_line_records_no_id(tmp_path, answer):
    from schedulers.htcondor import operations

    conn = stand_ins(
        tmp_path, condor_q="exit 0", condor_history="exit 0", condor_submit=f"echo '{answer}'"
    )
    with pytest.raises(CommandFailed, match="condor_submit said"):
        operations.submit(conn, str(tmp_path / "w"), "portal-3-d", SUBMITTED)
    assert not (tmp_path / "w" / ".scheduler_id").exists()


def test_a_job_found_by_name_is_adopted(tmp_path):
    from schedulers.htcondor import operations

    conn = stand_ins(tmp_path, condor_q="echo 41", condor_history="exit 0", condor_submit="exit 9")
    found = operations.submit(conn, str(tmp_path / "w"), "portal-2-c", SUBMITTED)
    assert (found.scheduler_id, found.adopted) == ("41.0", True)


def test_numbers_a_job_wrote_into_its_ad_are_bounded():
    ads = [
        {
            "ClusterId": 1,
            "ProcId": 0,
            "Owner": "u",
            "PortalName": "p",
            "JobStatus": 4,
            "ExitCode": 10**12,
            "NumJobStarts": 10**15,
            "RequestGpus": -5,
            "RemoteWallClockTime": 1e300,
        }
    ]
    job = parsers.parse_jobs(json.dumps(ads), "condor_history", "u")[0]
    assert (job.exit_code, job.starts, job.gpus, job.wall_seconds) == (None, 0, 0, 0)


def test_ids_that_are_not_htcondors_are_reported_not_fatal(monkeypatch):
    from schedulers.htcondor import operations
    from schedulers.htcondor.scheduler import HTCONDOR

    monkeypatch.setattr(operations, "jobs", lambda *a, **k: {})
    job = factories.ref("123_4", state="running")
    found = HTCONDOR.statuses(None, "u", [job])  # type: ignore[arg-type]
    assert found[job.key].state == "running"  # left as it was
    assert "not an HTCondor job id" in found[job.key].unreadable


# -- where a job runs and what it is charged: never decided by its own (editable) ad ------


def ad(**fields) -> parsers.CondorJob:
    values = {"scheduler_id": "4.0", "owner": "condoruser", "name": "p", "status": 2}
    return parsers.CondorJob(**{**values, **fields})


CLAIMS = parsers.parse_claims(captured("condor_status_claims.json"))


def test_claimed_slots_are_read_from_the_startds_ads():
    assert CLAIMS == [parsers.Claim("slot1_1@vm", "vm", "4.0", "condoruser", 1, 1)]
    odd = [
        {"Name": "slot1@vm", "Machine": "vm", "State": "Unclaimed", "JobId": "4.0"},
        {"Name": "x y", "Machine": "vm", "State": "Claimed", "JobId": "4.0", "RemoteOwner": "u@d"},
        {"Name": "s@vm", "Machine": "vm", "State": "Claimed", "JobId": "4", "RemoteOwner": "u@d"},
        {"Name": "s@vm", "Machine": "v m", "State": "Claimed", "JobId": "4.0", "RemoteOwner": "u"},
        {"Name": "s@vm", "Machine": "vm", "State": "Claimed", "JobId": "4.0"},
    ]
    assert parsers.parse_claims(json.dumps(odd)) == []
    with pytest.raises(parsers.Unparsable):
        parsers.parse_claims("{")


@pytest.mark.parametrize(
    "remote_host, node, noted",
    [
        ("slot1_1@vm", "vm", False),  # the ad and the startd agree
        ("slot1@10.66.66.66", "", True),  # condor_qedit RemoteHost: refused, said so
        ("slot1@vm", "", True),  # another slot of the same machine: refused too
        ("", "", True),
    ],
)
def test_a_running_jobs_node_is_the_machine_whose_startd_holds_its_claim(remote_host, node, noted):
    from schedulers.htcondor.scheduler import confirmed
    from schedulers.seam import Status

    job = factories.ref("4.0", state="running", node="vm")
    running = ad(node=parsers._machine(remote_host), slot=parsers._slot(remote_host))
    got = confirmed(
        Status(state=Job.State.RUNNING, node=running.node), running, job, "condoruser", CLAIMS
    )
    assert got.node == node and bool(got.note) is noted
    # Another user's job with the same id (another schedd), or no claim heard of yet:
    # no node, nothing to say.
    for user, claims in (("someoneelse", CLAIMS), ("condoruser", [])):
        status = Status(state=Job.State.RUNNING, node=running.node)
        assert confirmed(status, running, job, user, claims) == Status(
            state=Job.State.RUNNING, node=""
        )


def test_without_the_collector_only_the_node_confirmed_before_is_kept():
    from schedulers.htcondor.scheduler import confirmed
    from schedulers.seam import Status

    job = factories.ref("4.0", state="running", node="vm")
    for remote_host, node in (("slot1_1@vm", "vm"), ("slot1@10.66.66.66", "")):
        running = ad(node=parsers._machine(remote_host), slot=parsers._slot(remote_host))
        status = Status(state=Job.State.RUNNING, node=running.node)
        assert confirmed(status, running, job, "condoruser", None).node == node
    # Ended or completing: the node confirmed last, whatever LastRemoteHost says; the
    # ad's only where none was (it ended between two syncs: no session was routed).
    ended = ad(status=4, node="10.66.66.66")
    status = Status(state=Job.State.COMPLETED, node="10.66.66.66")
    assert confirmed(status, ended, job, "condoruser", None).node == "vm"
    job = dataclasses.replace(job, node="")
    assert confirmed(status, ended, job, "condoruser", None).node == "10.66.66.66"


def test_usage_is_never_less_than_asked_nor_charged_to_an_account_the_job_chose():
    from datetime import UTC, datetime

    from schedulers.htcondor.scheduler import charged
    from schedulers.seam import Attempt

    # Partition gpu: 2 GPUs and 8 CPUs on a node.
    job = factories.ref(
        "4.0",
        partition="gpu",
        max_gpus_per_job=2,
        max_cpus_per_job=8,
        gpus=1,
        cpus=2,
        account="physics",
        node="vm",
    )
    run = Attempt("COMPLETED", "10.66.66.66", datetime(2026, 1, 1, tzinfo=UTC), None, 60, 0, 0)
    # GPUsProvisioned and CpusProvisioned edited down to 0, AcctGroup to another group.
    run = dataclasses.replace(run, account="other")
    assert (charged(run, job).gpus, charged(run, job).cpus) == (1, 2)
    assert charged(run, job).account == "physics" and charged(run, job).node == "vm"
    # Up: at most what a node of its partition has.
    more = dataclasses.replace(run, gpus=10**5, cpus=10**5)
    assert (charged(more, job).gpus, charged(more, job).cpus) == (2, 8)


def test_provisioned_resources_are_read_before_requested_ones():
    base = {"ClusterId": 1, "ProcId": 0, "Owner": "u", "PortalName": "p", "JobStatus": 4}
    cases = [
        ({"RequestGpus": 1, "GPUsProvisioned": 2, "RequestCpus": 1, "CpusProvisioned": 3}, 2, 3),
        ({"RequestGpus": 1, "AssignedGPUs": "GPU-a, GPU-b", "RequestCpus": 2}, 2, 2),
        ({"RequestGpus": 1, "GPUsProvisioned": 0}, 0, 0),
    ]
    for extra, gpus, cpus in cases:
        job = parsers.parse_jobs(json.dumps([{**base, **extra}]), "condor_history", "u")[0]
        assert (job.gpus, job.cpus) == (gpus, cpus), extra
