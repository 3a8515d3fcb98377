"""What a person's login prints is evidence about that person only (real sshd, Slurm and
sacctmgr; the dev cluster as the README's default per-user cluster: no service account).

hpcuser2's ~/.bashrc exports a ``sacctmgr`` that adds hpcuser2 to ``nlp`` as its member
and coordinator and moves hpcuser's default to ``nlp``, and a ``squeue`` that places
hpcuser2's jobs on another host; the portal's clean environment (``env -i``) clears those,
so it also defines a function named ``/usr/bin/env`` that does the same. Before: the project sync took the union of every login's
report, so hpcuser2 became a manager of ``nlp`` and saw the owner's ``nlp`` runs; and the
node hpcuser2's login named was where the session proxy connected."""

import json
import subprocess
from pathlib import Path

import pytest

from clusters.models import ClusterAccount
from devtools import devcluster as devcluster_mod
from jobs import tasks
from jobs.models import Job
from projects import access
from projects import tasks as project_tasks
from projects.models import Membership, Project
from proxy.models import SessionLink
from tests import factories
from tests.devcluster.helpers import sync_until

# The file rewrites hpcuser2's ~/.bashrc and its accounts: it runs while no other Slurm test does (tests/conftest.py).
pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True), pytest.mark.alone]

FORGED_HOST = "127.0.0.2"  # inside the demo's upstream networks, yet not the job's node

FORGERIES = f"""# portal test: a login environment that lies
sacctmgr() {{
  command sacctmgr "$@"
  case "$*" in
    *"show assoc"*) echo "nlp|hpcuser2" ;;
    *withcoord*) echo "nlp|hpcuser2" ;;
    *"show user"*) echo "hpcuser|nlp"; echo "hpcuser2|nlp" ;;
  esac
}}
squeue() {{ command squeue "$@" | sed 's/"node[0-9]*"/"{FORGED_HOST}"/g'; }}
export -f sacctmgr squeue
# The portal's reads run as `/usr/bin/env -i PATH=... <command>`, which clears the exported
# functions above; a function named /usr/bin/env still runs first (bash allows it).
/usr/bin/env() {{
  case "$*" in
    *squeue*) command /usr/bin/env "$@" | sed 's/"node[0-9]*"/"{FORGED_HOST}"/g' ;;
    *sacctmgr*)
      command /usr/bin/env "$@"
      printf '#assoc\nnlp|hpcuser2\n#coord\nnlp|hpcuser2\n#default\nhpcuser|nlp\n' ;;
    *) command /usr/bin/env "$@" ;;
  esac
}}
"""


@pytest.fixture
def lying_login():
    """hpcuser2's ~/.bashrc with FORGERIES in front; restored as it was afterwards."""
    path = Path("/home/hpcuser2/.bashrc")
    before = path.read_bytes()
    path.write_bytes(FORGERIES.encode() + before)
    try:
        yield
    finally:
        path.write_bytes(before)


@pytest.fixture
def per_user_cluster(devcluster_info, owner, outsider, cancel_leftover_slurm_jobs):
    """The dev cluster with owner as hpcuser and outsider as hpcuser2, and no service
    account (nobody's login is believed about anyone else)."""
    cluster = devcluster_mod.register(
        devcluster_info,
        {owner.username: devcluster_info["default_user"], outsider.username: "hpcuser2"},
    )
    ClusterAccount.objects.filter(cluster=cluster, user__isnull=True).delete()
    cluster.sync_reads_all_jobs = False
    cluster.save(update_fields=["sync_reads_all_jobs"])
    return cluster


def test_a_forged_sacctmgr_gives_no_role_and_moves_no_default(
    per_user_cluster, owner, outsider, lying_login
):
    cluster = per_user_cluster
    for _ in range(2):  # every login read, whatever the turn
        project_tasks.sync_cluster_projects.apply(args=[cluster.pk]).get()
    nlp = Project.objects.get(cluster=cluster, name="nlp")
    assert nlp.pk not in access.roles(outsider)
    forged = Membership.objects.filter(project=nlp, user=outsider).first()
    assert forged is None or (forged.self_reported and not forged.coordinator)
    # The owner's default is what the owner's own login said, not hpcuser2's forgery.
    defaults = Membership.objects.filter(user=owner, is_default=True, project__cluster=cluster)
    assert [m.project.name for m in defaults] == ["portal"]
    # The owner's own reads place the owner (for charging: no service account vouches).
    assert Membership.objects.filter(project=nlp, user=owner, self_reported=True).exists()

    run = factories.job(owner, cluster, "sleep 1", account="nlp", state="running")
    assert run.project == nlp
    api = factories.api_client(outsider)
    assert api.get(f"/api/v1/jobs/{run.pk}/").status_code == 404
    assert run.pk not in [j["id"] for j in api.get("/api/v1/jobs/").json()["results"]]


def test_a_forged_squeue_never_chooses_where_the_session_connects(
    per_user_cluster, outsider, lying_login, client
):
    """hpcuser2's notebook (real JupyterLab on a dev node): its owner's login says it runs
    on FORGED_HOST. The sync records that node as the login's word only; the connection
    file is not believed from it, and the registration call, coming from the real node's
    address, is refused; the session never routes anywhere."""
    job = factories.job(
        outsider, per_user_cluster, "", kind=Job.Kind.NOTEBOOK, time_limit_minutes=10
    )
    tasks.submit_job.apply(args=[job.pk])
    sync_until(job, lambda j: j.state == "running" and j.node, 120, "to run")
    assert job.node == FORGED_HOST and not job.node_vouched
    real = subprocess.run(
        ["squeue", "-h", "-j", job.scheduler_job_id, "-o", "%N"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.strip()
    assert real.startswith("node"), real

    session = SessionLink.for_job(job)
    # The notebook wrote its connection file; the sync reads none without a vouched node.
    for _ in range(3):
        tasks.sync_jobs(Job.objects.filter(pk=job.pk))
    session.refresh_from_db()
    assert session.state == "starting" and session.host == ""

    secret = session.issue_register_secret()
    response = client.post(
        f"/sessions/register/{session.public_id}/",
        json.dumps({"port": 8888, "token": "t" * 32}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
        REMOTE_ADDR="127.0.0.1",  # where node1 and node2 are
    )
    assert response.status_code == 403, response.content
    session.refresh_from_db()
    assert session.state == "starting" and session.host != FORGED_HOST
    assert not session.is_open
