"""The catalog against the real cluster: the admin's image check over SSH, and a job that
fails because of its image says why (real sshd, Slurm and the job's stderr)."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from django.urls import reverse

from catalog import checks as image_checks
from catalog.models import ImageCheck
from jobs import tasks
from jobs.models import Job
from tests import factories
from tests.devcluster.helpers import sync_until

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]

CHANGELIST = reverse("admin:jobs_containerimage_changelist")
MODULE_INITS = (
    "/etc/profile.d/lmod.sh",
    "/etc/profile.d/modules.sh",
    "/usr/share/lmod/lmod/init/bash",
)


@pytest.fixture
def shared_dir():
    """A directory the cluster user can read, like a site's shared image store."""
    path = Path(tempfile.mkdtemp(prefix="portal-images-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_the_admin_check_finds_a_missing_sif_a_missing_runtime_and_modules(
    client, owner, staff, devcluster, devcluster_info, shared_dir
):
    present = shared_dir / "present.sif"
    present.write_bytes(b"SIF!\n")
    present.chmod(0o644)
    missing = shared_dir / "missing.sif"
    images = [
        factories.image("missing", "missing", runtime="apptainer", location=str(missing)),
        factories.image("present", "present", runtime="apptainer", location=str(present)),
        factories.image("modules", "modules", modules="cuda/12.4"),
        factories.image("registry", "registry", runtime="podman", location="docker://python:3.12"),
        factories.image("host", "host"),
    ]
    # Checked as the admin's own cluster account (never as another user's).
    owner.is_staff = owner.is_superuser = True
    owner.save()
    client.force_login(owner)
    response = client.post(
        CHANGELIST,
        {"action": "check_on_clusters", "_selected_action": [i.pk for i in images]},
        follow=True,
    )
    checks = {c.image.slug: c for c in ImageCheck.objects.filter(cluster=devcluster)}
    assert set(checks) == {i.slug for i in images}
    assert {c.checked_as for c in checks.values()} == {devcluster_info["default_user"]}

    assert not checks["missing"].ok
    assert f"image file {missing} is missing" in checks["missing"].problems
    assert f"✔ image file {present} is there (5 bytes)" in checks["present"].report.splitlines()
    # This machine has no container runtime (README): the check says so, as it would
    # for a cluster where apptainer is not on the login node's PATH.
    for slug, runtime in (
        ("missing", "apptainer"),
        ("present", "apptainer"),
        ("registry", "podman"),
    ):
        if shutil.which(runtime) is None:
            assert (
                f"{runtime} is not installed on the login node (not on PATH)"
                in checks[slug].problems
            )
    assert (
        "· docker://python:3.12 is pulled when a job starts; not checked here"
        in checks["registry"].report.splitlines()
    )
    if not any(os.path.exists(f) for f in MODULE_INITS):
        # The dev cluster has no Lmod or Environment Modules: reported as such.
        assert checks["modules"].problems == [
            "the module command is not available (neither Lmod nor Environment Modules is set up)"
        ]
    assert checks["host"].ok and checks["host"].report.startswith("✔ nothing to check")

    page = response.content.decode()
    # The action's messages: one per image with problems, naming the cluster and image.
    assert f"Missing on {devcluster.name}: " in page and f"image file {missing} is missing" in page
    listing = client.get(CHANGELIST).content.decode()
    assert '<span class="portal-check bad"' in listing and "✘ " + devcluster.name in listing

    # Checked again after the file appears: the record is replaced, not added to.
    missing.write_bytes(b"now here")
    missing.chmod(0o644)
    (check,) = image_checks.run([images[0]], devcluster, owner)
    assert ImageCheck.objects.filter(image=images[0]).count() == 1
    assert f"image file {missing} is there (8 bytes)" in check.report
    # An admin without an account there (and no service account) is told so; nobody
    # else's login is borrowed.
    devcluster.accounts.filter(user__isnull=True).delete()
    (check,) = image_checks.run([images[0]], devcluster, staff)
    assert not check.ok and check.checked_as == ""
    assert "not checked: you have no account on" in check.report


def wait_final(job: Job, seconds: float = 60) -> Job:
    return sync_until(job, lambda j: j if j.is_final else None, seconds, "to end")


def test_a_job_that_fails_in_its_setup_shows_the_end_of_stderr(client, owner, devcluster):
    """Before: 'exited with status 1' and nothing else; the cause was in stderr.log."""
    with_modules = factories.image("with-modules", "with-modules", modules="cuda/12.4")
    job = wait_final(factories.submitted_job(owner, devcluster, "echo never", image=with_modules))
    assert job.state == Job.State.FAILED, job.message
    assert "stderr" in job.events.last().due  # its stderr's end is owed (jobs/outbox.py)
    tasks.read_error_tail.apply(args=[job.pk])
    job.refresh_from_db()
    assert "portal: module load cuda/12.4 failed" in job.stderr_tail.splitlines()

    client.force_login(owner)
    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert "Last lines of stderr" in page and "module load cuda/12.4 failed" in page
    api = client.get(f"/api/v1/jobs/{job.pk}/").json()
    assert "portal: module load cuda/12.4 failed" in api["stderr_tail"]


def test_a_python_traceback_is_kept_and_a_huge_stderr_stays_bounded(owner, devcluster):
    command = (
        "python3 - <<'EOF'\n"
        "import sys\n"
        "sys.stderr.write('x' * 50_000_000 + '\\n')\n"
        "print('epoch 1: 10%\\repoch 1: 100%', file=sys.stderr)\n"
        "raise RuntimeError('CUDA out of memory')\n"
        "EOF"
    )
    job = wait_final(factories.submitted_job(owner, devcluster, command))
    assert job.state == Job.State.FAILED
    tasks.read_error_tail.apply(args=[job.pk])
    job.refresh_from_db()
    lines = job.stderr_tail.splitlines()
    assert lines[-1] == "RuntimeError: CUDA out of memory"
    assert "epoch 1: 100%" in lines
    assert len(job.stderr_tail) <= 2000
