"""The provider's account API (identity/accounts.py): its answers read as data and bounded,
the people asked in order, the disabled withdrawn. A stand-in HTTP server in a thread; the
real glewlwyd is in tests/proxy/test_provider_accounts.py."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from identity import accounts
from identity.models import Identity
from identity.tokens import ApiToken
from tests import factories

ISSUER = "https://idp.example.org"


class Accounts(BaseHTTPRequestHandler):
    """GET /user/<name>: the account from ``answers`` (status, body), 404 when absent."""

    answers: dict[str, tuple[int, bytes]] = {}
    seen: list[tuple[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.seen.append((self.path, self.headers.get("Authorization", "")))
        status, body = self.answers.get(self.path.removeprefix("/user/"), (404, b"{}"))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def provider(settings):
    Accounts.answers, Accounts.seen = {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Accounts)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.PORTAL_OIDC_ISSUER = ISSUER
    settings.PORTAL_OIDC_CLIENT_ID = "portal"
    settings.PORTAL_OIDC_ACCOUNT_URL = f"http://127.0.0.1:{server.server_port}/user/{{username}}"
    settings.PORTAL_OIDC_ACCOUNT_AUTHORIZATION = "token sekrit"
    yield Accounts
    server.shutdown()
    server.server_close()


def person(name: str, *, confirmed_ago: float | None = 0.0) -> Identity:
    user = factories.user(name, f"{name}-pass-123")
    return factories.identity(
        user, ISSUER, f"{name}-sub", confirmed_ago=confirmed_ago, provider_username=name
    )


def enabled(value) -> tuple[int, bytes]:
    return 200, json.dumps({"username": "x", "enabled": value}).encode()


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (200, b'{"enabled": true}', True),
        (200, b'{"enabled": false}', False),
        (200, b'[{"enabled": false}]', False),  # a search's one match
        (404, b"", False),  # gone at the provider
    ],
)
def test_answers_that_decide(status, body, expected, settings):
    settings.PORTAL_OIDC_ACCOUNT_ENABLED_FIELD = "enabled"
    assert accounts.parse(status, body) is expected


@pytest.mark.parametrize(
    "status, body",
    [
        (500, b'{"enabled": false}'),
        (401, b""),
        (200, b"<html>"),
        (200, b'{"enabled": "false"}'),  # a string is no answer
        (200, b"{}"),
        (200, b'[{"enabled": false}, {"enabled": true}]'),
    ],
)
def test_answers_that_decide_nothing(status, body, settings):
    settings.PORTAL_OIDC_ACCOUNT_ENABLED_FIELD = "enabled"
    with pytest.raises(accounts.Unknown):
        accounts.parse(status, body)


@pytest.mark.django_db
def test_a_name_is_one_path_segment(provider):
    identity = person("ann")
    identity.provider_username = "../admin?x=1"
    assert accounts.url_for(identity).endswith("/user/..%2Fadmin%3Fx%3D1")


@pytest.mark.django_db
def test_a_disabled_person_is_withdrawn_and_the_rest_untouched(provider):
    ann, bob, cyd = person("ann"), person("bob"), person("cyd")
    ApiToken.issue(bob.user, "live")
    provider.answers = {"ann": enabled(True), "bob": enabled(False), "cyd": (503, b"")}
    assert accounts.run() == {"enabled": 1, "withdrawn": 1, "unknown": 1}
    assert {auth for _, auth in provider.seen} == {"token sekrit"}
    bob.refresh_from_db()
    assert bob.confirmed_at is None and bob.account_checked_at is not None
    assert ApiToken.objects.get(user=bob.user).revoked_at is not None
    for kept in (ann, cyd):
        kept.refresh_from_db()
        assert kept.confirmed_at is not None
    cyd.refresh_from_db()
    assert cyd.account_checked_at is None  # no answer: asked first again next time


@pytest.mark.django_db
def test_urgent_people_first_then_the_longest_unasked(provider, settings):
    people = [person(f"p{i}") for i in range(5)]
    person("stale", confirmed_ago=10**7)  # confirmation lapsed: never asked
    provider.answers = {p.provider_username: enabled(True) for p in people}
    settings.PORTAL_OIDC_ACCOUNT_BATCH = 2
    urgent = {people[4].user_id}
    accounts.register_urgent(lambda: urgent)
    try:
        assert accounts.run() == {"enabled": 2, "withdrawn": 0, "unknown": 0}
        asked = [path.rsplit("/", 1)[1] for path, _ in provider.seen]
        assert sorted(asked) == ["p0", "p4"]
        provider.seen.clear()
        urgent.clear()
        for _ in range(2):
            accounts.run()
        asked = sorted(path.rsplit("/", 1)[1] for path, _ in provider.seen)
        assert asked == ["p0", "p1", "p2", "p3"]  # everyone once before anyone twice
    finally:
        accounts._urgent.clear()


@pytest.mark.django_db
def test_a_huge_or_endless_answer_is_cut(provider, settings):
    ann = person("ann")
    provider.answers = {"ann": (200, b'{"enabled": false, "x": "' + b"a" * 200_000 + b'"}')}
    assert accounts.run() == {"enabled": 0, "withdrawn": 0, "unknown": 1}
    ann.refresh_from_db()
    assert ann.confirmed_at is not None


@pytest.mark.django_db
def test_off_without_a_url(settings):
    settings.PORTAL_OIDC_ISSUER = ISSUER
    settings.PORTAL_OIDC_ACCOUNT_URL = ""
    assert accounts.run() == {}


def test_the_beat_asks_every_few_seconds(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["check-provider-accounts"]
    assert entry["task"] == accounts_task_name() and entry["schedule"] <= 5


def accounts_task_name() -> str:
    from identity import tasks

    return tasks.check_accounts.name
