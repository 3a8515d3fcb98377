"""The dev cluster is real: real sshd on 127.0.0.1, real slurmctld/slurmd, fake GPUs via GRES."""

import re
import subprocess
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from clusters import ssh
from clusters.models import Cluster, ClusterAccount
from tests import factories, polling

pytestmark = [pytest.mark.django_db, pytest.mark.devcluster]


@pytest.fixture
def account(devcluster, owner):
    return ClusterAccount.for_user(devcluster, owner)


@pytest.fixture
def conn(account):
    connection = ssh.connect_account(account)
    yield connection
    connection.close()


def job_state(conn: ssh.Connection, job_id: str) -> tuple[str, str]:
    out = conn.run(["scontrol", "show", "job", "-o", job_id]).stdout
    state = re.search(r"\bJobState=(\S+)", out).group(1)
    exit_code = re.search(r"\bExitCode=(\S+)", out).group(1)
    return state, exit_code


# A job that asks for a node's every GPU may wait behind a GPU job of the Slurm tests' other
# half (tests/conftest.py: they run two at once): it waits as long as one may hold them.
GPU_WAIT = 300


def wait_for_end(conn: ssh.Connection, job_id: str, timeout: float = 60) -> tuple[str, str]:
    last = ("", "")

    def ended() -> tuple[str, str] | None:
        nonlocal last
        last = job_state(conn, job_id)
        return last if last[0] not in {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING"} else None

    return polling.until(ended, timeout, lambda: f"job {job_id} to end (still {last[0]})")


def test_sinfo_shows_the_gpu_and_cpu_partitions_on_two_nodes(conn):
    out = conn.run(["sinfo", "-h", "-o", "%P|%G|%l|%D|%N"]).stdout
    rows: dict[str, list[list[str]]] = {}
    for line in out.split():
        rows.setdefault(line.split("|")[0], []).append(line.split("|")[1:])
    assert set(rows) == {"gpu*", "cpu"}
    # Two fake GPUs on each node, of a different type on each: v100 on node1, a100 on node2.
    assert sorted((r[0], r[3]) for r in rows["gpu*"]) == [
        ("gpu:a100:2", "node2"),
        ("gpu:v100:2", "node1"),
    ]
    assert {r[1] for r in rows["cpu"]} == {"30:00"}  # the cpu partition's short max time


def test_one_job_runs_on_both_nodes(conn):
    """Slurm's multiple-slurmd mode: `srun -N2` runs a task on each node."""
    out = conn.run(
        [
            "srun",
            "-N2",
            "--ntasks-per-node=1",
            "-p",
            "cpu",
            "-t",
            "1",
            "sh",
            "-c",
            "echo $SLURMD_NODENAME",
        ],
        timeout=60,
    ).stdout
    assert sorted(out.split()) == ["node1", "node2"]


def test_gpu_job_over_openssh_reaches_completed(devcluster_info, tmp_path):
    """The issue's own check, with the stock ssh client and the pinned host key."""
    user = devcluster_info["default_user"]
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(
        f"[127.0.0.1]:{devcluster_info['ssh_port']} {devcluster_info['host_key']}\n"
    )
    base = [
        "ssh",
        "-F",
        "/dev/null",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-i",
        devcluster_info["users"][user]["private_key_file"],
        "-p",
        str(devcluster_info["ssh_port"]),
        f"{user}@127.0.0.1",
    ]
    out_file = f"/tmp/portal-devcluster-test-{uuid.uuid4().hex}.out"
    submit = subprocess.run(
        base
        + [
            "sbatch",
            "--parsable",
            "--gres=gpu:1",
            f"--output={out_file}",
            "--wrap='echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES'",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    job_id = submit.stdout.strip()
    assert job_id.isdigit(), submit.stderr
    show = ""

    def completed() -> bool:
        nonlocal show
        show = subprocess.run(
            base + ["scontrol", "show", "job", "-o", job_id],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        assert "JobState=FAILED" not in show, show
        return "JobState=COMPLETED" in show

    polling.until(completed, 60, lambda: f"job {job_id} to complete: {show}")
    output = subprocess.run(
        base + ["cat", out_file], capture_output=True, text=True, timeout=30
    ).stdout
    assert re.search(r"^CUDA_VISIBLE_DEVICES=\d", output, re.M), output


def test_paramiko_connection_submits_on_stdin_and_the_job_completes(conn):
    out_file = f"/tmp/portal-devcluster-test-{uuid.uuid4().hex}.out"
    script = "#!/bin/bash\necho gpus=$CUDA_VISIBLE_DEVICES\nexit 0\n"
    job_id = conn.run(
        ["sbatch", "--parsable", "--gres=gpu:v100:2", f"--output={out_file}"], stdin=script
    ).stdout.strip()
    # Both v100s of node1: it may wait behind another test's GPU job (tests/conftest.py).
    assert wait_for_end(conn, job_id, timeout=GPU_WAIT) == ("COMPLETED", "0:0")
    assert re.match(r"gpus=\d,\d$", conn.run(["cat", out_file]).stdout.strip())


def test_shell_metacharacters_in_arguments_are_never_executed(conn):
    marker = f"/tmp/portal-pwned-{uuid.uuid4().hex}"
    hostile = [
        f"$(touch {marker})",
        f"`touch {marker}`",
        f"; touch {marker}",
        f"| touch {marker}",
        "'\"\\",
    ]
    out = conn.run(["printf", "%s\\n", *hostile]).stdout
    assert out.splitlines() == hostile
    assert conn.run(["test", "-e", marker], check=False).exit_status == 1


def test_a_changed_host_key_is_refused(devcluster, account):
    devcluster.host_key = (
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOqmCr0ke0UTgwV9vPwNDnqf4mr8v07WgMJOuFbxZuBs"
    )
    devcluster.save()
    account.refresh_from_db()
    with pytest.raises(ssh.HostKeyMismatch, match="Host key mismatch .* Refusing to connect"):
        ssh.connect_account(account)


def test_a_pinned_fingerprint_is_accepted(devcluster, account):
    devcluster.host_key = devcluster.host_key_fingerprint
    devcluster.save()
    account.refresh_from_db()
    with ssh.connect_account(account) as conn:
        assert conn.run(["whoami"]).stdout.strip() == account.username


def test_a_key_the_cluster_does_not_know_is_refused_clearly(devcluster, devcluster_info, account):
    other = [u for u in devcluster_info["users"] if u != account.username][0]
    account.set_private_key(Path(devcluster_info["users"][other]["private_key_file"]).read_text())
    with pytest.raises(ssh.AuthenticationFailed, match="refused the account's key") as exc:
        ssh.connect_account(account)
    assert not exc.value.transient


def test_a_closed_port_is_a_transient_error(devcluster, account):
    devcluster.ssh_port = 1  # nothing listens there
    devcluster.save()
    account.refresh_from_db()
    with pytest.raises(ssh.ClusterUnreachable) as exc:
        ssh.connect_account(account)
    assert exc.value.transient


def test_slurm_rejection_carries_slurms_message(conn):
    with pytest.raises(ssh.CommandFailed, match="invalid partition specified: nope"):
        conn.run(["sbatch", "--partition=nope", "--wrap=true"])


def test_register_devcluster_command_is_idempotent(devcluster_info, owner):
    for _ in range(2):
        out = StringIO()
        call_command(
            "register_devcluster",
            "--account",
            f"owner={devcluster_info['default_user']}",
            stdout=out,
        )
    assert "Registered cluster devcluster" in out.getvalue()
    assert ClusterAccount.objects.filter(cluster__name="devcluster").count() == 2  # service + owner
    # Only `make demo` asks for it to be the default cluster (--default): never by itself.
    assert not Cluster.objects.get(name="devcluster").is_default
    other = factories.cluster("another", is_default=True)
    out = StringIO()
    call_command("register_devcluster", "--default", stdout=out)
    assert "the default cluster" in out.getvalue()
    assert list(Cluster.objects.filter(is_default=True).values_list("name", flat=True)) == [
        "devcluster"
    ]
    other.refresh_from_db()
    assert not other.is_default


def test_command_output_arrives_whole_every_time(conn):
    """sshd may send the exit status before the last output: reading stops at EOF, not at exit."""
    expected = "".join(f"{i}\n" for i in range(1, 50001))
    for _ in range(30):
        assert conn.run(["seq", "1", "50000"]).stdout == expected


def test_generated_key_pair_logs_in_once_its_public_key_is_installed(
    devcluster, devcluster_info, outsider
):
    """The portal makes the key pair; the user installs the public key; SSH works."""
    user = [u for u in devcluster_info["users"] if u != devcluster_info["default_user"]][0]
    account = factories.account(devcluster, outsider, user)
    public = account.generate_key_pair()
    account.save()
    assert public.startswith("ssh-ed25519 ") and public.endswith(
        f"hpc-portal:outsider@{devcluster.name}"
    )
    assert "PRIVATE" not in ClusterAccount.objects.get(pk=account.pk).private_key_encrypted
    with pytest.raises(ssh.AuthenticationFailed):
        ssh.connect_account(account)
    authorized = Path(f"/home/{user}/.ssh/authorized_keys")
    original = authorized.read_text()
    authorized.write_text(original + public + "\n")
    try:
        with ssh.connect_account(account) as conn:
            assert conn.run(["whoami"]).stdout.strip() == user
    finally:
        authorized.write_text(original)


def test_admin_trust_step_pins_the_presented_host_key(devcluster, devcluster_info, client, staff):
    devcluster.host_key = "SHA256:" + "A" * 43
    devcluster.save()
    client.force_login(staff)
    response = client.post(
        "/admin/jobs/cluster/",
        {"action": "pin_presented_host_key", "_selected_action": [devcluster.pk]},
        follow=True,
    )
    devcluster.refresh_from_db()
    assert devcluster.host_key == devcluster_info["host_key"]
    assert devcluster.host_key_fingerprint in response.content.decode()
