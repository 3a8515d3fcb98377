"""A scheduler's account as a project, on both real clusters: the dev cluster's Slurm
accounts and the pool's HTCondor accounting groups (make devcluster / make condorpool:
vision with both users, nlp with the first), read by the sync; real jobs charged to each
seen by the colleague as vision's viewers see them, never acted on, and nlp's not at all."""

import pytest

from devtools import devcluster as devcluster_mod
from projects import sync
from projects.models import Membership, Role
from tests import factories
from tests.devcluster.helpers import run_until

pytestmark = [pytest.mark.django_db]


def test_an_account_is_a_project_with_the_same_rule_for_its_runs(
    scheduler_cluster, scheduler_info, owner
):
    colleague = factories.user("colleague", "colleague-pass-123")
    first = scheduler_info["default_user"]
    second = next(u for u in sorted(scheduler_info["users"]) if u != first)
    cluster = devcluster_mod.register(scheduler_info, {"owner": first, "colleague": second})
    assert sync.sync_cluster(cluster).read
    roles = {
        (m.project.name, m.user.username): m.role
        for m in Membership.objects.filter(project__cluster=cluster).select_related(
            "project", "user"
        )
    }
    assert roles[("vision", "colleague")] == Role.VIEWER
    assert roles[("nlp", "owner")] == Role.MEMBER
    assert ("nlp", "colleague") not in roles

    shown = factories.submitted_job(owner, cluster, "sleep 60", account="vision")
    hidden = factories.submitted_job(owner, cluster, "sleep 60", account="nlp")
    for job in (shown, hidden):
        # Running, not only queued: an accounting group set up so that it never matches
        # (a declared group without quota) once passed for "pending".
        run_until(job, {"running"}, timeout=90)
    assert (shown.project.name, hidden.project.name) == ("vision", "nlp")
    api = factories.api_client(colleague)
    assert [j["id"] for j in api.get("/api/v1/jobs/").json()["results"]] == [shown.pk]
    assert api.get(f"/api/v1/jobs/{shown.pk}/").json()["state"] == "running"
    assert api.post(f"/api/v1/jobs/{shown.pk}/cancel/").status_code == 403
    assert api.get(f"/api/v1/jobs/{hidden.pk}/").status_code == 404
    assert api.post(f"/api/v1/jobs/{hidden.pk}/cancel/").status_code == 404
    shown.set_private(True)
    assert api.get(f"/api/v1/jobs/{shown.pk}/").status_code == 404
