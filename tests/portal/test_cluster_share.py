"""clusters/share.py: one person's places among the requests waiting on clusters,
counted in Redis across web processes; past them a 429 with Retry-After before any SSH;
and every view's cluster work under a deadline. (Real sshd and two web processes:
tests/devcluster/test_web_share.py.)"""

from __future__ import annotations

import secrets

import pytest

from clusters import deadline, ssh
from clusters import share as cluster_share
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_place(settings):
    settings.PORTAL_PERSON_CLUSTER_REQUESTS = 1


def test_past_their_places_a_persons_request_is_429_before_any_login(
    client, cluster, one_place, monkeypatch
):
    person = factories.user(f"p-{secrets.token_hex(4)}")
    account = factories.account(cluster, person, "alice")
    logins: list[object] = []
    seen_deadline: list[float | None] = []

    def connect(account):
        logins.append(account)
        seen_deadline.append(deadline.left())
        raise ssh.ClusterUnreachable("no cluster behind this test")

    monkeypatch.setattr(ssh, "connect_account", connect)
    client.force_login(person)
    url = f"/account/{account.pk}/test/"
    # A place held elsewhere (another request of theirs, another web process).
    assert cluster_share.acquire(f"cluster-share:{person.pk}", "elsewhere")
    refused = client.post(url, HTTP_ACCEPT="application/json")
    assert refused.status_code == 429 and refused["Retry-After"] == "2"
    assert "waiting on a cluster" in refused.json()["error"] and logins == []
    # Another person is not counted against it.
    other = factories.user(f"q-{secrets.token_hex(4)}")
    theirs = factories.account(cluster, other, "bob")
    client.force_login(other)
    assert client.post(f"/account/{theirs.pk}/test/").json()["ok"] is False  # (unreachable)
    assert len(logins) == 1
    # The place is given back: the first person's next request goes through.
    cluster_share.release(f"cluster-share:{person.pk}", "elsewhere")
    client.force_login(person)
    assert client.post(url).status_code == 200 and len(logins) == 2
    # Under the web deadline (PORTAL_WEB_CLUSTER_SECONDS), not the command's own timeout.
    assert all(left is not None and 0 < left <= 60 for left in seen_deadline)


def test_a_request_gives_its_place_back_when_its_view_returns(
    client, cluster, one_place, monkeypatch
):
    def connect(account):
        raise ssh.ClusterUnreachable("no cluster behind this test")

    monkeypatch.setattr(ssh, "connect_account", connect)
    person = factories.user(f"r-{secrets.token_hex(4)}")
    account = factories.account(cluster, person, "carol")
    client.force_login(person)
    for _ in range(3):  # one place, three requests in turn: each gives it back
        assert client.post(f"/account/{account.pk}/test/").status_code == 200
    assert cluster_share.acquire(f"cluster-share:{person.pk}", "after")  # it is free
