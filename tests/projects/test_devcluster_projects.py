"""Projects follow Slurm's associations on the real dev cluster (make devcluster: vision
with hpcuser, its coordinator, and hpcuser2; nlp with hpcuser only; portal, everyone's
default, for charging only): the roles as read, each job charged to its account's
project, and an association removed with sacctmgr taking the colleague's access away at
the next sync. (The same rule on both schedulers: tests/scheduling/test_projects.py.)"""

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from devtools import devcluster as devcluster_mod
from jobs.models import Job
from projects import tasks as project_tasks
from projects.models import Membership, Role
from tests import factories
from tests.devcluster.helpers import run_until

# transaction=True: the task closes its database connection at the end, as in a worker.
# The file makes and removes the scheduler's accounts: it runs while no other Slurm test does (tests/conftest.py).
pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True), pytest.mark.alone]


def sacctmgr(*args: str) -> None:
    subprocess.run(["sacctmgr", "-i", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def team(devcluster_info, owner, cancel_leftover_slurm_jobs):
    colleague = factories.user("colleague", "colleague-pass-123")
    second = next(
        u for u in sorted(devcluster_info["users"]) if u != devcluster_info["default_user"]
    )
    cluster = devcluster_mod.register(
        devcluster_info, {"owner": devcluster_info["default_user"], "colleague": second}
    )
    yield cluster, colleague, second
    # As make devcluster left it, whatever the test did.
    found = subprocess.run(
        [
            "sacctmgr",
            "-n",
            "-P",
            "show",
            "assoc",
            "account=vision",
            f"user={second}",
            "format=user",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    if second not in found:
        sacctmgr("add", "user", second, "account=vision")


def roles(cluster) -> dict[tuple[str, str], str]:
    return {
        (m.project.name, m.user.username): m.role
        for m in Membership.objects.filter(project__cluster=cluster).select_related(
            "project", "user"
        )
    }


def test_accounts_are_projects_and_a_removed_association_loses_access(team, owner):
    cluster, colleague, second = team
    assert project_tasks.sync_cluster_projects.apply(args=[cluster.pk]).get()["joined"] == 5
    assert roles(cluster) == {
        ("vision", "owner"): Role.MANAGER,  # the account's coordinator
        ("vision", "colleague"): Role.VIEWER,
        ("nlp", "owner"): Role.MEMBER,
        ("portal", "owner"): Role.NONE,  # for charging only
        ("portal", "colleague"): Role.NONE,
    }

    shown = factories.submitted_job(owner, cluster, "sleep 60", account="vision")
    other = factories.submitted_job(owner, cluster, "sleep 60", account="nlp")
    mine = factories.submitted_job(owner, cluster, "sleep 60")  # the default: portal
    for job in (shown, other, mine):
        run_until(job, {"running", "pending"}, timeout=60)
    assert [j.project.name for j in (shown, other, mine)] == ["vision", "nlp", "portal"]
    api = factories.api_client(colleague)
    assert [j["id"] for j in api.get("/api/v1/jobs/").json()["results"]] == [shown.pk]

    # Slurm's account vision no longer has the colleague: gone at the next sync.
    sacctmgr("delete", "user", second, "account=vision")
    outcome = project_tasks.sync_cluster_projects.apply(args=[cluster.pk]).get()
    assert outcome["left"] == 1
    assert ("vision", "colleague") not in roles(cluster)
    assert api.get(f"/api/v1/jobs/{shown.pk}/").status_code == 404
    assert not Job.objects.visible_to(colleague).exists()


def sacct_gpu_hours(account: str, user: str, since: str) -> float:
    """GPU-hours of ``user`` on ``account`` as sacct says them, summed here."""
    out = subprocess.run(
        ["sacct", "-a", "-X", "-n", "-P", "-A", account, "-S", since, "-E", "now"]
        + ["-o", "User,ElapsedRaw,AllocTRES"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    seconds = 0
    for line in out.splitlines():
        who, elapsed, tres = line.split("|")
        gpus = dict(part.split("=", 1) for part in tres.split(",") if "=" in part).get("gres/gpu")
        if who == user and gpus:
            seconds += int(elapsed) * int(gpus)
    return seconds / 3600


def test_the_project_page_agrees_with_sacct_and_says_the_fair_share(
    team, owner, client, settings, request
):
    from datetime import date

    from projects.models import Project
    from projects.usage import first_month

    settings.PORTAL_PROJECT_USAGE_CACHE = 0
    cluster, colleague, second = team
    project_tasks.sync_cluster_projects.apply(args=[cluster.pk])
    job = factories.submitted_job(
        owner, cluster, "sleep 3", account="vision", partition="gpu", gpus=1
    )
    run_until(job, {"completed"}, timeout=120)
    # The site's quota file (Open OnDemand's format), readable by the cluster's users.
    # (Not under pytest's tmp_path: its folders are the test runner's alone.)
    quota = Path(tempfile.gettempdir()) / f"portal-test-quota-{os.getpid()}.json"
    entry = {
        "user": second,
        "path": f"/home/{second}",
        "total_block_usage": 1048576,
        "block_limit": 4194304,
        "total_file_usage": 3,
        "file_limit": 100,
    }
    quota.write_text(json.dumps({"version": 1, "timestamp": 1, "quotas": [entry]}))
    quota.chmod(0o644)
    request.addfinalizer(lambda: quota.unlink(missing_ok=True))
    cluster.quota_files = str(quota)
    cluster.save()

    client.force_login(colleague)
    vision = Project.objects.get(cluster=cluster, name="vision")
    since = first_month(date.today()).isoformat()
    # sacct read before and after the page: a job of an earlier test still running on
    # the account grows between the reads, and the page's figure must lie between them.
    before = sacct_gpu_hours("vision", devcluster_info_user(cluster), since)
    page = client.get(f"/projects/{vision.pk}/").content.decode()
    after = sacct_gpu_hours("vision", devcluster_info_user(cluster), since)
    assert before > 0
    shown = float(
        page.split(f'data-member="{devcluster_info_user(cluster)}"')[1]
        .split("data-gpu-hours>")[1]
        .split("<")[0]
    )
    assert before - 0.0011 <= shown <= after + 0.0011  # the page's three decimals
    assert "its share of the cluster recently" in page  # sshare's figures, in words
    assert "Allocation: 100 GPU-hours" in page
    assert f'data-quota="{second}"' in page and "1.0 GB" in page and "25%" in page


def devcluster_info_user(cluster) -> str:
    from clusters.models import ClusterAccount

    return ClusterAccount.objects.get(cluster=cluster, user__username="owner").username
