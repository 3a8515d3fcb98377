"""Projects follow Slurm's associations on the real dev cluster (make devcluster: vision
with hpcuser, its coordinator, and hpcuser2; nlp with hpcuser only; portal, everyone's
default, for charging only): the roles as read, each job charged to its account's
project, and an association removed with sacctmgr taking the colleague's access away at
the next sync. (The same rule on both schedulers: tests/scheduling/test_projects.py.)"""

import subprocess

import pytest

from devtools import devcluster as devcluster_mod
from jobs.models import Job
from projects import tasks as project_tasks
from projects.models import Membership, Role
from tests import factories
from tests.devcluster.helpers import run_until

# transaction=True: the task closes its database connection at the end, as in a worker.
pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


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
