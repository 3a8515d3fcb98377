"""Stage-in at launch on the real path (real sshd, Slurm and the portal's submit step): a
folder of the person's home, named as the API takes it, is copied to the node's scratch,
checked against its manifest, read there by the command, and its outputs come back after
it; a folder that changes while it is copied fails the job before the command runs."""

import os
import secrets
import signal
import subprocess
from pathlib import Path

import pytest

from clusters import files
from clusters.models import ClusterAccount
from jobs.launch import validate_request
from jobs.models import Job
from tests import factories, polling
from tests.devcluster.helpers import remote, run_until

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]

# What the job checks of its copy, and what it writes there for the way back.
READS_THE_COPY = r"""set -e
case "$PORTAL_STAGED_DIR" in "$HOME"/*|"$PORTAL_WORK_DIR"/*) echo "not on the node" >&2; exit 9;; esac
test "$(cat "$PORTAL_STAGED_DIR/a b.txt")" = alpha
test "$(cat "$PORTAL_STAGED_DIR/sub dir/deep.txt")" = deep
test -f "$PORTAL_STAGED_DIR/$(printf 'new\nline')"
mkdir "$PORTAL_STAGED_DIR/out"
sha256sum < "$PORTAL_STAGED_DIR/a b.txt" | cut -c1-64 > "$PORTAL_STAGED_DIR/out/result.txt"
echo "$PORTAL_STAGED_DIR" > "$PORTAL_WORK_DIR/staged-at"
"""


@pytest.fixture
def place(devcluster, owner):
    """(the owner's account, its home, a fresh folder there with the data to stage)."""
    account = ClusterAccount.for_user(devcluster, owner)
    home = devcluster.work_dir_root("home", account.username)
    folder = f"portal-stage-test-{secrets.token_hex(3)}"
    data = f"{home}/{folder}/data set"
    remote(
        account,
        [
            "sh",
            "-c",
            'set -e; mkdir -p "$1/sub dir"; cd "$1"; echo alpha > "a b.txt"; '
            'echo deep > "sub dir/deep.txt"; printf n > "$(printf "new\\nline")"; '
            "head -c 262144 /dev/zero > changing.bin",
            "sh",
            data,
        ],
    )
    yield account, home, folder
    remote(account, ["rm", "-rf", "--", f"{home}/{folder}"])


def launched(owner, devcluster, command: str, **staging) -> Job:
    """The job the API would make of this request (its stage-in checked and placed in the
    owner's folders by the launch's own checks), submitted by the submit task's code."""
    factories.image("host-batch")
    checked = validate_request(
        owner,
        {
            "container": "host-batch",
            "cluster": devcluster.name,
            "partition": "cpu",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 1,
            "time_limit": 5,
            "command": command,
            **staging,
        },
    )
    assert not checked.errors, checked.errors
    return factories.submitted_job(owner, devcluster, command, staging=checked.job.staging)


def test_a_job_reads_its_folder_on_the_node_and_its_outputs_come_back(devcluster, owner, place):
    account, home, folder = place
    job = launched(
        owner,
        devcluster,
        READS_THE_COPY,
        stage_in=f"{folder}/data set",
        stage_out=["out", "staged-at"],
        stage_out_to=f"{folder}/results",
    )
    job = run_until(job, set(Job.FINAL_STATES))
    stdout = files.read_job_log(job, "stdout").text
    assert job.state == "completed", (job.message, stdout, files.read_job_log(job, "stderr").text)
    assert "4 file(s) copied to" in stdout and "checksums match" in stdout
    results = f"{home}/{folder}/results"
    # The checksum the job computed from its copy on the node, of the folder's file.
    digest = remote(account, ["cat", f"{results}/out/result.txt"]).strip()
    expected = remote(account, ["sha256sum", f"{home}/{folder}/data set/a b.txt"]).split()[0]
    assert digest == expected
    staged_at = remote(account, ["cat", f"{results}/staged-at"]).strip()  # from the work dir
    assert staged_at.endswith("/data") and "/portal-stage-" in staged_at
    # The manifest stays with the job; the copy on the node is gone.
    manifest = remote(account, ["cat", f"{job.work_dir}/stage-in.sha256"])
    assert "./a b.txt" in manifest and "./new\\nline" in manifest
    gone = remote(account, ["sh", "-c", 'test -e "$1" && echo left || echo gone', "sh", staged_at])
    assert gone.strip() == "gone"


def test_a_folder_that_changes_during_the_copy_fails_the_job_before_the_command(
    devcluster, owner, place
):
    """A writer rewrites one file of the folder every millisecond while the job stages
    (as a training run of someone else, or a second job, would): the copy cannot match the
    checksums taken from the folder just before, and the command never runs."""
    account, home, folder = place
    changing = f"{home}/{folder}/data set/changing.bin"
    writer = subprocess.Popen(
        [
            "runuser",
            "-u",
            account.username,
            "--",
            "/usr/bin/python3",  # the node's own (the portal's virtualenv is not theirs)
            "-c",
            "import os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_WRONLY)\n"
            "n = 0\n"
            "while True:\n"
            "    n += 1\n"
            "    os.pwrite(fd, n.to_bytes(8, 'little'), 0)\n"
            "    time.sleep(0.001)\n",
            changing,
        ],
        start_new_session=True,  # runuser forks: the writer is its child, killed with it below
    )
    try:
        polling.until(
            lambda: Path(changing).read_bytes()[:8] != bytes(8), 10, "the writer to start"
        )
        job = launched(
            owner,
            devcluster,
            'touch "$PORTAL_WORK_DIR/ran"',
            stage_in=f"{home}/{folder}/data set",
        )
        job = run_until(job, set(Job.FINAL_STATES))
        assert writer.poll() is None, "the writer stopped before the job ended"
    finally:
        os.killpg(writer.pid, signal.SIGKILL)  # runuser and the writer (before: the writer
        writer.wait()  # outlived the suite, rewriting the file every millisecond)
    stderr = files.read_job_log(job, "stderr").text
    assert job.state == "failed" and job.exit_code == 1, (job.message, stderr)
    assert "./changing.bin: FAILED" in stderr
    assert "does not match the manifest" in stderr and "the command was not run" in stderr
    ran = remote(
        account, ["sh", "-c", 'test -e "$1/ran" && echo ran || echo no', "sh", job.work_dir]
    )
    assert ran.strip() == "no"


def test_a_cancelled_job_still_gets_its_outputs_back_from_the_node(devcluster, owner, place):
    """scancel (as a person's cancel, or the time limit, sends): the command is stopped,
    the outputs it left on the node's scratch come back, the node's copy goes."""
    account, home, folder = place
    job = launched(
        owner,
        devcluster,
        'echo trained > "$PORTAL_STAGED_DIR/model.pt"; '
        'echo "$PORTAL_STAGED_DIR" > "$PORTAL_WORK_DIR/staged-at"; exec sleep 300',
        stage_in=f"{folder}/data set",
        stage_out=["model.pt"],
        stage_out_to=f"{folder}/results",
    )
    job = run_until(job, {"running"})
    staged_at = polling.until(
        lambda: remote(account, ["sh", "-c", f"cat {job.work_dir}/staged-at 2>/dev/null || :"]),
        30,
        "the command to start",
    ).strip()
    subprocess.run(["scancel", job.scheduler_job_id], check=True)
    job = run_until(job, set(Job.FINAL_STATES))
    assert job.state == "cancelled", job.message
    stdout = files.read_job_log(job, "stdout").text
    assert "stopped (TERM): copying the outputs back" in stdout, stdout
    assert "1 path(s) copied to" in stdout
    assert remote(account, ["cat", f"{home}/{folder}/results/model.pt"]).strip() == "trained"
    gone = remote(account, ["sh", "-c", 'test -e "$1" && echo left || echo gone', "sh", staged_at])
    assert gone.strip() == "gone"
