"""A database that does not answer is a 503 with Retry-After, in the API's error format
or as a short page, never a 500 (issue #30: 14 of 56 submissions got a 500 while
PostgreSQL restarted; clients could not tell a bug from an outage)."""

import pytest
from django.contrib import auth
from django.db import InterfaceError, OperationalError

from identity.tokens import ApiToken
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "error",
    [
        OperationalError("connection to server at 127.0.0.1 failed: Connection refused"),
        InterfaceError("connection already closed"),
    ],
)
def test_the_api_answers_503_with_retry_after(owner, monkeypatch, error):
    client = factories.api_client(owner)

    def down(*args, **kwargs):
        raise error

    monkeypatch.setattr(ApiToken, "authenticate", down)
    for response in (client.get("/api/v1/jobs/"), client.post("/api/v1/jobs/", {}, "json")):
        assert response.status_code == 503
        assert response["Retry-After"] == "5"
        body = response.json()["error"]
        assert body["status"] == 503 and body["code"] == "unavailable"
        assert "database" in body["message"] and "Connection refused" not in body["message"]


def test_a_page_answers_a_short_503_page(client, owner, monkeypatch):
    client.force_login(owner)

    def down(request):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(auth, "get_user", down)
    response = client.get("/")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert b"unavailable" in response.content and b"server closed" not in response.content


def test_other_errors_are_not_hidden(client, owner, monkeypatch):
    client.force_login(owner)

    def broken(request):
        raise RuntimeError("a bug")

    monkeypatch.setattr(auth, "get_user", broken)
    with pytest.raises(RuntimeError):
        client.get("/")


def test_a_page_whose_budget_redis_cannot_count_answers_503(client, owner, monkeypatch):
    """The pages that reach a cluster count their budget in Redis: Redis away is a 503
    too (as in the API), not a 500."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    from common import throttle

    def away(self, request, view):
        raise RedisConnectionError("Connection refused")

    monkeypatch.setattr(throttle.Budget, "allow_request", away)
    client.force_login(owner)
    response = client.get("/jobs/1/logs/stdout/")
    assert response.status_code == 503 and response["Retry-After"] == "5"
