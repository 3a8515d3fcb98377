"""The real OpenID Connect provider from `make idp` (deploy/idp/up.sh, glewlwyd) for tests.

``provider()`` reads what up.sh kept in its state directory (root only) and skips the test
when the provider is absent, or fails it when ``PORTAL_REQUIRE_DEVCLUSTER=1`` (as
deploy/run-tests.sh sets as root, where `make test` has started it).

The client ``portal`` accepts exact redirect URIs only (glewlwyd has no patterns), so a
test stack on a random port registers its own with ``redirect_uris(provider, base_url)``,
which removes them again afterwards.

glewlwyd's session cookie carries an empty ``Domain=``: browsers take it as a host-only
cookie, Python's cookie jar drops it, so ``ProviderClient`` keeps cookies by hand.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from devtools import provider_login
from devtools.provider_login import pkce_pair, query_of  # noqa: F401 (the tests' names)

CALLBACK_PATH = "/oidc/callback/"
# Where the portal sends a person after the provider's logout (LOGOUT_REDIRECT_URL).
POST_LOGOUT_PATH = "/accounts/login/"


def state_dir() -> Path:
    return Path(os.environ.get("PORTAL_IDP_DIR", "/var/lib/portal-idp"))


@dataclass(frozen=True)
class Person:
    password: str
    groups: list[str]
    email: str
    name: str


@dataclass(frozen=True)
class Provider:
    issuer: str  # e.g. http://localhost:4593/api/oidc
    client_id: str
    client_secret: str
    users: dict[str, Person]
    admin_password: str = field(repr=False)
    state: Path
    # The audience a script's access token gets with resource=<this> (RFC 8707).
    api_audience: str = ""
    # glewlwyd's account API and the header that opens it (PORTAL_OIDC_ACCOUNT_*).
    account_url: str = ""
    account_authorization: str = field(default="", repr=False)

    @property
    def api(self) -> str:
        """glewlwyd's REST API (admin and login), next to the plugin's /api/oidc."""
        return self.issuer.rsplit("/", 1)[0]

    @property
    def origin(self) -> str:
        parts = urlsplit(self.issuer)
        return f"{parts.scheme}://{parts.netloc}"

    def discovery(self) -> dict:
        return httpx.get(f"{self.issuer}/.well-known/openid-configuration", timeout=10).json()


class ProviderMissing(Exception):
    pass


def read_provider(state: Path | None = None) -> Provider:
    state = state or state_dir()
    try:
        env = provider_login.read_portal_env(state / "portal.env")
        people = json.loads((state / "users.json").read_text())["users"]
        admin_password = (state / "admin.password").read_text().strip()
    except (OSError, ValueError, KeyError) as exc:
        raise ProviderMissing(
            f"no identity provider in {state} (`make idp` as root): {exc}"
        ) from exc
    provider = Provider(
        issuer=env["PORTAL_OIDC_ISSUER"],
        client_id=env["PORTAL_OIDC_CLIENT_ID"],
        client_secret=env["PORTAL_OIDC_CLIENT_SECRET"],
        users={
            name: Person(p["password"], list(p["groups"]), p["email"], p["name"])
            for name, p in people.items()
        },
        admin_password=admin_password,
        state=state,
        api_audience=env.get("PORTAL_OIDC_API_AUDIENCE", ""),
        account_url=env.get("PORTAL_OIDC_ACCOUNT_URL", ""),
        account_authorization=env.get("PORTAL_OIDC_ACCOUNT_AUTHORIZATION", ""),
    )
    try:
        provider.discovery()
    except (httpx.HTTPError, ValueError) as exc:
        raise ProviderMissing(
            f"the identity provider {provider.issuer} does not answer: {exc}"
        ) from exc
    return provider


def provider() -> Provider:
    """The provider `make idp` started; skips (or fails, when required) without it."""
    try:
        return read_provider()
    except ProviderMissing as exc:
        if os.environ.get("PORTAL_REQUIRE_DEVCLUSTER") == "1":
            pytest.fail(f"PORTAL_REQUIRE_DEVCLUSTER=1 but {exc}")
        pytest.skip(str(exc))


class ProviderClient(provider_login.ProviderSession):
    """httpx against the provider, keeping its cookies as a browser does."""

    def __init__(self, provider: Provider) -> None:
        super().__init__(provider.api)
        self.provider = provider


# --- redirect URIs for test stacks on random ports ----------------------------------------


@contextmanager
def _client_lock(provider: Provider) -> Iterator[None]:
    """Test processes run side by side: each read-modify-write of the client holds this."""
    with open(provider.state / "run" / "client.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _admin(provider: Provider) -> ProviderClient:
    admin = ProviderClient(provider)
    response = admin.sign_in("admin", provider.admin_password)
    assert response.status_code == 200, f"glewlwyd admin sign-in: {response.status_code}"
    return admin


def _change_client(provider: Provider, add: bool, redirect: str, post_logout: str) -> None:
    admin = _admin(provider)
    try:
        with _client_lock(provider):
            url = f"{provider.api}/client/{provider.client_id}"
            client = admin.request("GET", url).raise_for_status().json()
            for key, uri in (
                ("redirect_uri", redirect),
                ("post_logout_redirect_uris", post_logout),
            ):
                uris = [u for u in client.get(key, []) if u != uri]
                client[key] = [*uris, uri] if add else uris
            client.pop("source", None)
            admin.request("PUT", url, json=client).raise_for_status()
    finally:
        admin.close()


@contextmanager
def redirect_uris(provider: Provider, base_url: str) -> Iterator[tuple[str, str]]:
    """Let the client ``portal`` come back to a stack at ``base_url`` (e.g.
    ``http://127.0.0.1:51234``): registers ``base_url/oidc/callback/`` as redirect URI and
    ``base_url/accounts/login/`` as post-logout redirect URI, yields both, removes them afterwards."""
    base = base_url.rstrip("/")
    redirect, post_logout = f"{base}{CALLBACK_PATH}", f"{base}{POST_LOGOUT_PATH}"
    _change_client(provider, True, redirect, post_logout)
    try:
        yield redirect, post_logout
    finally:
        _change_client(provider, False, redirect, post_logout)


# --- a person signs in to the portal (Django's test client) through the provider ------------

TEST_CLIENT_BASE = "http://testserver"  # where Django's test client says it is


def portal_settings(provider: Provider, settings, **more) -> None:
    """Point the portal of this test process (the ``settings`` fixture) at ``provider``."""
    from identity import provider as portal_provider

    settings.PORTAL_OIDC_ISSUER = provider.issuer
    settings.PORTAL_OIDC_CLIENT_ID = provider.client_id
    settings.PORTAL_OIDC_CLIENT_SECRET = provider.client_secret
    for name, value in more.items():
        setattr(settings, name, value)
    portal_provider.forget_keys()


def sign_in_to_portal(provider: Provider, client, username: str):
    """``username`` signs in to the portal behind Django's test ``client`` through the
    provider's password login: /oidc/login/, the provider (as its login page's
    "Continue" does), /oidc/callback/ (the portal then redeems the code at the provider).
    Needs ``redirect_uris(provider, TEST_CLIENT_BASE)``. Returns the callback's response."""
    start = client.get("/oidc/login/")
    assert start.status_code == 302, start.content[:500]
    person = ProviderClient(provider)
    try:
        with person_lock(provider, username):
            assert person.sign_in(username, provider.users[username].password).status_code == 200
            # (httpx's params= would replace the URL's query, not add to it)
            answer = person.request("GET", start["Location"] + "&g_continue=")
    finally:
        person.close()
    assert answer.status_code == 302, answer.text[:500]
    back = urlsplit(answer.headers["location"])
    assert f"{back.scheme}://{back.netloc}{back.path}" == TEST_CLIENT_BASE + CALLBACK_PATH
    return client.get(back.path, query_of(answer.headers["location"]))


@contextmanager
def backchannel_logout_uri(provider: Provider, base_url: str) -> Iterator[str]:
    """The provider sends its logout tokens for the client ``portal`` to the stack at
    ``base_url`` (one URI per client: the previous one is put back afterwards)."""
    uri = f"{base_url.rstrip('/')}/oidc/backchannel-logout/"
    admin = _admin(provider)
    url = f"{provider.api}/client/{provider.client_id}"

    def put(value: str) -> str:
        with _client_lock(provider):
            client = admin.request("GET", url).raise_for_status().json()
            before = client.get("backchannel_logout_uri") or ""
            client["backchannel_logout_uri"] = value
            client["backchannel_logout_session_required"] = "1"
            client.pop("source", None)
            admin.request("PUT", url, json=client).raise_for_status()
            return before

    try:
        before = put(uri)
        try:
            yield uri
        finally:
            put(before)
    finally:
        admin.close()


_held: dict[str, int] = {}  # person -> depth of person_lock in this process


@contextmanager
def person_lock(provider: Provider, username: str) -> Iterator[None]:
    """Test processes run side by side, and one may disable ``username`` at the provider
    (``changed_person``) while another signs them in: each holds this across what depends
    on the person as configure.py made them. Re-entrant within a process."""
    if _held.get(username):
        _held[username] += 1
        try:
            yield
        finally:
            _held[username] -= 1
        return
    with open(provider.state / "run" / f"person-{username}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _held[username] = 1
        try:
            yield
        finally:
            _held[username] = 0
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def changed_person(provider: Provider, username: str, **fields) -> Iterator[None]:
    """glewlwyd's admin API changes ``username`` (``groups=[...]``, ``enabled=False``), as a
    centre's administrators would; every field is put back afterwards (other tests rely on
    the people of configure.py as they are), and no other test process uses the person
    meanwhile (``person_lock``)."""
    with person_lock(provider, username):
        admin = _admin(provider)
        url = f"{provider.api}/user/{username}"
        try:
            before = admin.request("GET", url).raise_for_status().json()
            before.pop("source", None)
            admin.request("PUT", url, json={**before, **fields}).raise_for_status()
            try:
                yield
            finally:
                admin.request("PUT", url, json=before).raise_for_status()
        finally:
            admin.close()


def code_flow_tokens(
    client: ProviderClient, username: str, redirect_uri: str, **extra: str
) -> dict:
    """The provider's token answer for ``username`` after the code flow with PKCE (sign in,
    authorize, exchange the code) as a script would run it; ``extra`` goes to both the
    authorization and the token request (e.g. ``resource``)."""
    provider = client.provider
    with person_lock(provider, username):
        return provider_login.code_flow_tokens(
            client,
            provider.discovery(),
            (provider.client_id, provider.client_secret),
            redirect_uri,
            (username, provider.users[username].password),
            **extra,
        )
