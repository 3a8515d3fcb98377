"""Stage-in on the real HTCondor pool: the same job script copies the folder into the
job's own scratch directory (HTCondor's, removed by it at the end), checked against its
manifest, and the outputs come back to the work directory."""

import secrets

import pytest

from clusters import files
from clusters.models import ClusterAccount
from jobs.launch import validate_request
from jobs.models import Job
from tests import factories
from tests.devcluster.helpers import remote, run_until

pytestmark = [pytest.mark.condorpool, pytest.mark.django_db]

READS_THE_COPY = r"""set -e
case "$PORTAL_STAGED_DIR" in "$_CONDOR_SCRATCH_DIR"/*) ;; *) echo "not in the scratch" >&2; exit 9;; esac
test "$(cat "$PORTAL_STAGED_DIR/a b.txt")" = alpha
echo "read $(cat "$PORTAL_STAGED_DIR/a b.txt")" > "$PORTAL_STAGED_DIR/result.txt"
"""


def test_a_job_reads_its_folder_in_htcondors_scratch_and_its_output_comes_back(condorpool, owner):
    account = ClusterAccount.for_user(condorpool, owner)
    home = condorpool.work_dir_root("home", account.username)
    folder = f"portal-stage-test-{secrets.token_hex(3)}"
    remote(
        account,
        ["sh", "-c", 'mkdir -p "$1" && echo alpha > "$1/a b.txt"', "sh", f"{home}/{folder}"],
    )
    try:
        factories.image("host-batch")
        checked = validate_request(
            owner,
            {
                "container": "host-batch",
                "cluster": condorpool.name,
                "partition": "cpu",
                "gpus": 0,
                "cpus": 1,
                "memory_gb": 1,
                "time_limit": 5,
                "command": READS_THE_COPY,
                "stage_in": folder,
                "stage_out": ["result.txt"],
            },
        )
        assert not checked.errors, checked.errors
        job = factories.submitted_job(
            owner, condorpool, READS_THE_COPY, staging=checked.job.staging
        )
        job = run_until(job, set(Job.FINAL_STATES), timeout=90)
        stdout = files.read_job_log(job, "stdout").text
        stderr = files.read_job_log(job, "stderr").text
        assert job.state == "completed", (job.message, stdout, stderr)
        assert "checksums match" in stdout
        assert remote(account, ["cat", f"{job.work_dir}/result.txt"]) == "read alpha\n"
    finally:
        remote(account, ["rm", "-rf", "--", f"{home}/{folder}"])
