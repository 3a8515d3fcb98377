"""What users' jobs write into their own ads is data, never structure (real HTCondor):
another user's job, or one of the same user outside the portal, named like a portal job,
never speaks for it; a job that renames itself is no longer taken for the portal's."""

import time

import pytest

from jobs import tasks
from jobs.models import Job
from tests import factories
from tests.conftest import as_pool_root
from tests.devcluster.helpers import remote, run_until

pytestmark = [pytest.mark.condorpool, pytest.mark.django_db]

FORGED = """executable = /bin/sh
arguments = "-c 'exit 7'"
initialdir = {home}
+PortalName = "{name}"
+ExitCode = 7
queue
"""


def test_jobs_named_like_a_portal_job_never_speak_for_it(condorpool, owner):
    victim = factories.submitted_job(owner, condorpool, "sleep 3")
    # Another user's job and one of the owner's own, submitted outside the portal under
    # the victim's name, both ending with exit code 7 before it.
    description = FORGED.format(home="/home/condoruser2", name=victim.slurm_name)
    as_pool_root(
        "runuser",
        "-u",
        "condoruser2",
        "--",
        "sh",
        "-c",
        f"cat <<'EOF' | condor_submit -\n{description}EOF",
    )
    mine = FORGED.format(home="/home/condoruser", name=victim.slurm_name)
    remote(
        victim.cluster_account,
        ["bash", "-c", 'printf "%s" "$1" | condor_submit -terse -', "x", mine],
    )
    victim = run_until(victim, {"completed", "failed"}, timeout=90)
    assert (victim.state, victim.exit_code) == ("completed", 0)


def test_a_job_that_renames_itself_is_no_longer_taken_for_the_portals(condorpool, owner):
    job = factories.submitted_job(
        owner,
        condorpool,
        'condor_qedit "$PORTAL_SCHEDULER_JOB_ID" PortalName \'"someone-else"\'; sleep 60',
    )
    for _ in range(60):
        tasks.sync_jobs(Job.objects.filter(pk=job.pk))
        job.refresh_from_db()
        if job.scheduler_unseen_since is not None:
            break
        time.sleep(0.5)
    # Not ended (nor moved) by what it wrote: its grace period runs.
    assert job.state in {"pending", "running"}
    assert job.scheduler_unseen_since is not None
