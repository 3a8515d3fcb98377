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


def test_readyz_names_each_dependency_and_is_ok_when_all_answer(client):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.content.decode().splitlines() == [
        "database: ok",
        "migrations: ok",
        "cache: ok",
        "broker: ok",
    ]
    assert "sessionid" not in response.cookies


def test_readyz_is_503_naming_what_is_missing(client, monkeypatch, settings):
    from portal import celery, health

    monkeypatch.setattr(health, "_migrated", False)
    monkeypatch.setattr(
        health, "_migrations_applied", lambda: False
    )  # (an instance started before `migrate`)
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
        }
    }
    monkeypatch.setattr(celery.app.conf, "broker_url", "redis://127.0.0.1:1/0")
    response = client.get("/readyz")
    assert response.status_code == 503
    lines = response.content.decode().splitlines()
    assert lines[:2] == ["database: ok", "migrations: not ready"]
    assert lines[2].startswith("cache: unavailable: ") and lines[3].startswith(
        "broker: unavailable: "
    )
