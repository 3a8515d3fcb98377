"""Pages that reach a cluster, and a job's session registration, have request budgets
(common/throttle.py, issue #30): the call past the budget is a 429 with Retry-After and
reaches no cluster. The SSH boundary (clusters.pool.with_connection) is a fake that
counts its calls (and answers as an unreachable cluster)."""

import json
import threading
import uuid

import pytest

from clusters import pool, ssh
from jobs.models import Job
from proxy.models import SessionLink
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def ssh_calls(monkeypatch):
    calls: list[object] = []

    def with_connection(account, operation):
        calls.append(account)  # each page answers an unreachable cluster with a 502
        raise ssh.ClusterUnreachable("a test: no cluster behind this fake")

    monkeypatch.setattr(pool, "with_connection", with_connection)
    return calls


@pytest.fixture
def rates(settings):
    """Budgets of 3 calls; each test's own users and sessions, so no other test's count
    (kept in Redis under this run's prefix) is seen."""
    settings.PORTAL_PAGE_CLUSTER_RATE = "3/min"
    settings.PORTAL_SESSION_REGISTER_RATE = "3/min"


def person(name: str):
    return factories.user(f"{name}-{uuid.uuid4().hex[:8]}", "pass-123-pass")


@pytest.fixture
def running(cluster):
    """A running batch job of a fresh user's, with its account and work directory."""
    owner = person("owner")
    account = factories.account(cluster, owner, "alice")
    return factories.job(
        owner,
        cluster,
        state="running",
        cluster_account=account,
        scheduler_job_id="77",
        work_dir="/home/alice/.portal/jobs/1-x",
    )


def test_the_logs_page_past_its_budget_is_429_and_reaches_no_cluster(
    client, rates, running, ssh_calls
):
    client.force_login(running.owner)
    url = f"/jobs/{running.pk}/logs/stdout/"
    codes = [client.get(url).status_code for _ in range(3)]
    assert 429 not in codes and len(ssh_calls) == 3
    refused = client.get(url)
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert "error" in refused.json()
    assert len(ssh_calls) == 3  # the refused call reached no cluster
    # Another user's budget is their own.
    other = person("other")
    client.force_login(other)
    assert client.get(url).status_code == 404


@pytest.mark.parametrize(
    "path, method",
    [
        ("/jobs/{job}/files/", "get"),
        ("/jobs/{job}/files/download/?path=out.txt", "get"),
        ("/account/{account}/test/", "post"),
    ],
)
def test_every_page_that_reaches_a_cluster_has_a_budget(
    client, rates, running, ssh_calls, path, method
):
    client.force_login(running.owner)
    url = path.format(job=running.pk, account=running.cluster_account_id)
    for _ in range(3):
        assert getattr(client, method)(url).status_code != 429
    reached = len(ssh_calls)
    refused = getattr(client, method)(url)
    assert refused.status_code == 429 and refused.has_header("Retry-After")
    assert len(ssh_calls) == reached


def test_the_budget_is_shared_by_those_pages(client, rates, running, ssh_calls):
    client.force_login(running.owner)
    client.get(f"/jobs/{running.pk}/logs/stdout/")
    client.get(f"/jobs/{running.pk}/files/")
    client.get(f"/jobs/{running.pk}/logs/stderr/")
    assert client.get(f"/jobs/{running.pk}/files/").status_code == 429


def test_experiment_data_and_opening_a_session_have_budgets(client, rates, cluster):
    owner = person("owner")
    experiment = factories.experiment_record(owner, cluster)
    notebook = factories.job(owner, cluster, "", kind=Job.Kind.NOTEBOOK, state="pending")
    link = SessionLink.for_job(notebook)
    client.force_login(owner)
    for url in (f"/experiments/{experiment.pk}/data/", f"/sessions/{link.public_id}/open/"):
        assert [client.get(url).status_code for _ in range(4)][-1] == 429


@pytest.fixture
def pending_link(cluster):
    """A pending notebook job's session link (the scheduler knows the job as 78)."""
    owner = person("owner")
    account = factories.account(cluster, owner, "alice")
    job = factories.job(
        owner,
        cluster,
        "",
        kind=Job.Kind.NOTEBOOK,
        state="pending",
        scheduler_job_id="78",
        cluster_account=account,
    )
    return SessionLink.for_job(job)


def register(client, link, secret):
    return client.post(
        f"/sessions/register/{link.public_id}/",
        json.dumps({"port": 8888, "token": "abc"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )


def test_registration_past_its_budget_is_429_and_asks_no_scheduler(
    client, rates, ssh_calls, queued_syncs, pending_link
):
    secret = pending_link.issue_register_secret()
    # Pending: the first call queues a sync of the job for a worker (never SSH from the
    # request; at most one per job every few seconds), and each is told to come back.
    assert [register(client, pending_link, secret).status_code for _ in range(3)] == [409] * 3
    assert queued_syncs == [(pending_link.job_id,)] and ssh_calls == []
    refused = register(client, pending_link, secret)
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert queued_syncs == [(pending_link.job_id,)] and ssh_calls == []


def test_calls_without_the_secret_do_not_spend_a_sessions_budget(
    client, rates, queued_syncs, pending_link
):
    """The session's id is its host name (TLS SNI, DNS, logs): whoever knows it may not use
    up the job's registrations."""
    secret = pending_link.issue_register_secret()
    assert {register(client, pending_link, "guessed").status_code for _ in range(10)} == {403}
    assert queued_syncs == []
    assert register(client, pending_link, secret).status_code == 409  # the job's own call
    assert queued_syncs == [(pending_link.job_id,)]


@pytest.mark.parametrize(
    "body", [b"[" * 100_000 + b"]" * 100_000, b'{"port": Infinity, "token": "abc"}']
)
def test_a_hostile_registration_body_is_a_400(client, rates, running_notebook, body):
    link = SessionLink.for_job(running_notebook)
    secret = link.issue_register_secret()
    response = client.post(
        f"/sessions/register/{link.public_id}/",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert response.status_code == 400 and len(response.content) < 200


def test_a_window_counts_requests_and_opens_again_when_it_ends():
    """common.throttle.WindowThrottle on the real Redis: the rate's number of requests, then
    refusals that say how long the window has left, a counter (not a list of times) under
    the key, and the budget back once the window has ended."""
    from django.core.cache import cache

    from common.throttle import Budget

    ident = f"window-{uuid.uuid4().hex}"

    class Quick(Budget):
        def get_rate(self) -> str:
            return "2/s"

    assert Quick("cluster-pages", ident).allow_request(None, None) is True
    assert Quick("cluster-pages", ident).allow_request(None, None) is True
    third = Quick("cluster-pages", ident)
    assert third.allow_request(None, None) is False and third.wait() == 1.0
    assert cache.get(f"throttle-window_cluster-pages_{ident}") == 3  # a count
    for _ in range(300):  # the window lasts one second
        if Quick("cluster-pages", ident).allow_request(None, None):
            break
        threading.Event().wait(0.01)
    else:
        raise AssertionError("the window never ended")


def test_a_window_on_a_cache_that_is_not_redis_counts_drfs_way(settings):
    """Django's local-memory cache (a deployment without Redis for its cache) is counted
    by DRF's own throttle, not sent Redis commands."""
    from common.throttle import Budget

    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

    class Local(Budget):
        def get_rate(self) -> str:
            return "2/min"

    ident = f"local-{uuid.uuid4().hex}"
    assert [Local("cluster-pages", ident).allow_request(None, None) for _ in range(3)] == [
        True,
        True,
        False,
    ]
    refused = Local("cluster-pages", ident)
    assert refused.allow_request(None, None) is False and 0 < refused.wait() <= 60
