"""jobs/ reaches session links only through jobs/sessions.py, which the proxy fills (that
jobs/ imports no floor above it is the floors contract, tests/test_floors.py)."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from jobs import sessions
from proxy.models import SessionLink


def test_the_proxy_registers_its_session_links_at_start_up():
    assert sessions.links() is SessionLink


def test_without_the_proxy_app_session_jobs_say_what_is_missing(monkeypatch):
    monkeypatch.setattr(sessions, "_links", None)
    with pytest.raises(ImproperlyConfigured, match="proxy app"):
        sessions.links()


class _Links:
    """Session links that note what the sync found (proxy/models.py's are tested there)."""

    def __init__(self) -> None:
        self.routed: list[tuple] = []

    def waiting(self, jobs):
        return list(jobs)

    def found(self, job, host, port, secret):  # noqa: ARG002
        self.routed.append((job.pk, host, port))
        return True


@pytest.mark.django_db
def test_a_connection_file_left_by_an_earlier_run_is_not_routed(owner, cluster, monkeypatch):
    """A requeued notebook's new run starts while the last run's connection.json is still
    in the work directory (the new run removes it, a moment later): the sync reads the run
    it names and passes over it until the file is the current run's."""
    from jobs import sync
    from jobs.models import Job
    from tests import factories

    job = factories.job(
        owner,
        cluster,
        "",
        kind=Job.Kind.NOTEBOOK,
        state="running",
        node="node1",
        node_vouched=True,  # (as the service account read it)
        attempt=1,
    )
    links = _Links()
    monkeypatch.setattr(sessions, "_links", links)
    files = [
        {"port": 3001, "secret": "s" * 32, "attempt": 0},  # the last run's, still there
        {"port": 3002, "secret": "t" * 32, "attempt": 1},  # this run's
        {"port": 3003, "secret": "u" * 32},  # a scheduler that does not say (HTCondor)
    ]
    monkeypatch.setattr(sync.pool, "with_connection", lambda account, read: files.pop(0))
    sync.discover_sessions(None, [job])
    assert links.routed == []
    sync.discover_sessions(None, [job])
    assert links.routed == [(job.pk, "node1", 3002)]
    sync.discover_sessions(None, [job])
    assert links.routed[-1] == (job.pk, "node1", 3003)
