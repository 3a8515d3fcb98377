"""/healthz: what HAProxy asks each web instance before sending it users."""

import pytest
from django.db import OperationalError

pytestmark = pytest.mark.django_db


def test_healthz_answers_ok_without_a_session(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.content == b"ok\n"
    assert "sessionid" not in response.cookies
    assert "no-cache" in response["Cache-Control"]


def test_healthz_is_503_when_this_instance_cannot_reach_the_database(client, monkeypatch):
    from portal import health

    def down():
        raise OperationalError("connection refused")

    monkeypatch.setattr(health.connection, "cursor", down)
    response = client.get("/healthz")
    assert response.status_code == 503


def test_healthz_takes_no_writes(client):
    assert client.post("/healthz").status_code == 405
