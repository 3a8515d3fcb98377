"""What users' jobs write into their own ads is data, never structure (real HTCondor): a
job's owner can condor_qedit its RemoteHost, which never moves its session's route. Forged
names and jobs that rename themselves, on both schedulers:
tests/scheduling/test_hostile_output.py."""

import pytest

from jobs import tasks
from jobs.models import Job
from tests import factories
from tests.devcluster.helpers import remote, sync_until

pytestmark = [pytest.mark.condorpool, pytest.mark.django_db]


def _sync_until(job: Job, done, timeout: float = 120, seen=None):
    """Sync (as beat would) until ``done(job, session)``; ``seen`` collects, per sync,
    (job's node, session's state and host, the address its route would connect to)."""
    from proxy import routes
    from proxy.models import SessionLink

    def session_done(job: Job) -> SessionLink | None:
        session = SessionLink.objects.select_related("job", "job__owner").get(job=job)
        route = routes.route_of(session)
        if seen is not None:
            seen.append((job.node, session.state, session.host, route and route.address))
        return session if done(job, session) else None

    return sync_until(job, session_done, timeout, lambda: f"its session to get there; {seen}")


def test_a_qedited_remotehost_never_moves_a_sessions_route(condorpool, owner):
    """Found by a security review: the node came from RemoteHost, which a job's owner can
    condor_qedit; the node change reset the session, and the connection file registered
    it again at the new "node", any address (the proxy a way into its network). Now the
    node is the machine whose startd reports the claim (condor_status): an edited
    RemoteHost routes nowhere, says so in the timeline, and the route comes back as it
    was once the ad agrees with the startd again."""
    from proxy import routes

    job = factories.job(owner, condorpool, "", kind=Job.Kind.NOTEBOOK, time_limit_minutes=10)
    tasks.submit_job.apply(args=[job.pk])
    first = _sync_until(job, lambda j, s: s.state == "ready" and s.is_open, timeout=180)
    route = routes.route_of(first)
    assert route is not None
    where = (first.host, first.port, route.address)
    slot = remote(job.cluster_account, ["condor_q", job.scheduler_job_id, "-af", "RemoteHost"])
    slot = slot.strip()
    assert slot.endswith(f"@{first.host}")

    remote(
        job.cluster_account,
        ["condor_qedit", job.scheduler_job_id, "RemoteHost", '"slot1@10.66.66.66"'],
    )
    seen: list = []
    _sync_until(job, lambda j, s: len(seen) >= 12, seen=seen)
    assert not [s for s in seen if s[3] not in (None, route.address)], seen
    assert not [s for s in seen if "10.66.66.66" in (s[0], s[2])], seen
    assert seen[-1][0] == "" and seen[-1][3] is None  # no node, no route while they disagree
    assert any(
        "HTCondor's job ad says it runs in slot 'slot1@10.66.66.66'" in e.message
        for e in job.events.all()
    )

    # The ad agrees with the startd again: the same route, never anything else.
    remote(job.cluster_account, ["condor_qedit", job.scheduler_job_id, "RemoteHost", f'"{slot}"'])
    again = _sync_until(job, lambda j, s: s.is_open, timeout=30)
    back = routes.route_of(again)
    assert back is not None and (again.host, again.port, back.address) == where
