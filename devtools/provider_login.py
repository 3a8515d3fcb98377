"""Signing in at the dev identity provider (glewlwyd, `make idp`) without a browser: its
password login, then the authorization code flow with PKCE as a script runs it. The
demo's set-up uses it to learn the demo person's subject (`manage.py link_demo_identity`);
the tests (tests/idp.py) to sign people in.

glewlwyd's session cookie carries an empty ``Domain=``: browsers take it as a host-only
cookie, Python's cookie jar drops it, so ``ProviderSession`` keeps cookies by hand."""

from __future__ import annotations

import base64
import hashlib
import secrets
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx


class LoginFailed(Exception):
    pass


def read_portal_env(path: Path) -> dict[str, str]:
    """deploy/idp/up.sh's portal.env (the portal's client settings): NAME='value' lines."""
    return {
        name: value.strip("'")
        for name, _, value in (
            line.partition("=") for line in path.read_text().splitlines() if "=" in line
        )
    }


class ProviderSession:
    """httpx against the provider's REST API (``api``: the folder of /api/oidc), keeping
    its cookies as a browser does."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.cookies: dict[str, str] = {}
        self.http = httpx.Client(timeout=15, event_hooks={"response": [self._keep_cookies]})

    def _keep_cookies(self, response: httpx.Response) -> None:
        for header in response.headers.get_list("set-cookie"):
            name, _, value = header.split(";", 1)[0].partition("=")
            if value:
                self.cookies[name.strip()] = value.strip()
            else:  # an emptied cookie is a removed one
                self.cookies.pop(name.strip(), None)

    def request(self, method: str, url: str, **kwargs) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}))
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        return self.http.request(method, url, headers=headers, **kwargs)

    def sign_in(self, username: str, password: str) -> httpx.Response:
        """What the login page does with the form: POST the password to /api/auth/."""
        return self.request(
            "POST", f"{self.api}/auth/", json={"username": username, "password": password}
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ProviderSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def pkce_pair() -> tuple[str, str]:
    """(code_verifier, S256 code_challenge)"""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def query_of(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def code_flow_tokens(
    session: ProviderSession,
    discovery: dict,
    client: tuple[str, str],
    redirect_uri: str,
    person: tuple[str, str],
    **extra: str,
) -> dict:
    """The provider's token answer for ``person`` (user name, password) after the code
    flow with PKCE (sign in, authorize, exchange the code) for ``client`` (id, secret);
    ``extra`` goes to both the authorization and the token request (e.g. ``resource``)."""
    verifier, challenge = pkce_pair()
    if (answer := session.sign_in(*person)).status_code != 200:
        raise LoginFailed(f"the provider refused {person[0]}'s password: {answer.status_code}")
    params = {
        "response_type": "code",
        "client_id": client[0],
        "redirect_uri": redirect_uri,
        "scope": "openid profile email",
        "state": "state-1",
        "nonce": "nonce-1",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "g_continue": "",
        **extra,
    }
    answer = session.request("GET", discovery["authorization_endpoint"], params=params)
    if answer.status_code != 302:
        raise LoginFailed(f"authorization: {answer.status_code} {answer.text[:300]}")
    code = query_of(answer.headers["location"]).get("code")
    if not code:
        raise LoginFailed(f"authorization gave no code: {answer.headers['location'][:300]}")
    token = httpx.post(
        discovery["token_endpoint"],
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
            **extra,
        },
        auth=client,
        timeout=15,
    )
    if token.status_code != 200:
        raise LoginFailed(f"token: {token.status_code} {token.text[:300]}")
    return token.json()


def subject_of(
    issuer: str, client: tuple[str, str], redirect_uri: str, person: tuple[str, str]
) -> str:
    """The subject the provider at ``issuer`` gives ``person`` (user name, password): what
    the portal keys their identity by (its userinfo's ``sub``)."""
    discovery = httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=15).json()
    with ProviderSession(issuer.rsplit("/", 1)[0]) as session:
        tokens = code_flow_tokens(session, discovery, client, redirect_uri, person)
    info = httpx.get(
        discovery["userinfo_endpoint"],
        headers={"Authorization": f"Bearer {tokens['access_token']}"},
        timeout=15,
    )
    if info.status_code != 200 or not info.json().get("sub"):
        raise LoginFailed(f"userinfo: {info.status_code} {info.text[:300]}")
    return str(info.json()["sub"])
