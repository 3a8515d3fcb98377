"""The real OpenID Connect provider (`make idp`: glewlwyd on 127.0.0.1) does what the
portal's sign-in relies on: discovery, a JWKS, code flow with PKCE S256, the claims the
portal maps (preferred_username, email, name, groups), refusal of a wrong password and of
unregistered redirect URIs, and RP-initiated logout. No portal code: plain HTTP, as a
browser and a relying party would speak it, and once through Chromium on its login page."""

import time
from pathlib import Path

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from tests import idp
from tests.e2e.pages import CHROMIUM, CHROMIUM_ARGS
from tests.livestack import free_port

pytestmark = pytest.mark.idp


@pytest.fixture
def client(idp_provider):
    c = idp.ProviderClient(idp_provider)
    yield c
    c.close()


@pytest.fixture
def stack_uris(idp_provider):
    """A redirect URI for a stack on a random port, as a test stack registers it."""
    with idp.redirect_uris(idp_provider, f"http://127.0.0.1:{free_port()}") as uris:
        yield uris


def authorize(client, redirect_uri, challenge, *, g_continue=True, **extra):
    """GET the authorization endpoint as the browser does after the login page's
    "Continue" (g_continue): a 302 to the callback with a code, or to the login page."""
    params = {
        "response_type": "code",
        "client_id": client.provider.client_id,
        "redirect_uri": redirect_uri,
        "scope": "openid profile email",
        "state": "state-123",
        "nonce": "nonce-456",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        **extra,
    }
    if g_continue:
        params["g_continue"] = ""
    return client.request(
        "GET", client.provider.discovery()["authorization_endpoint"], params=params
    )


def tokens_for(client, username, redirect_uri):
    """The whole code flow for ``username``: sign in, authorize, exchange the code."""
    provider = client.provider
    verifier, challenge = idp.pkce_pair()
    assert client.sign_in(username, provider.users[username].password).status_code == 200
    response = authorize(client, redirect_uri, challenge)
    assert response.status_code == 302, response.text
    location = response.headers["location"]
    assert location.startswith(redirect_uri + "?"), location
    query = idp.query_of(location)
    assert query["state"] == "state-123"
    token = httpx.post(
        provider.discovery()["token_endpoint"],
        data={
            "grant_type": "authorization_code",
            "code": query["code"],
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        },
        auth=(provider.client_id, provider.client_secret),  # client_secret_basic
        timeout=15,
    )
    assert token.status_code == 200, token.text
    return token.json()


def verified_claims(provider, id_token):
    keys = KeySet.import_key_set(httpx.get(provider.discovery()["jwks_uri"], timeout=10).json())
    token = jwt.decode(id_token, keys, algorithms=["RS256"])
    assert token.header["alg"] == "RS256"
    claims = token.claims
    assert claims["iss"] == provider.issuer
    assert claims["aud"] in (provider.client_id, [provider.client_id])
    assert claims["nonce"] == "nonce-456"
    assert claims["exp"] > time.time()
    return claims


def test_discovery_names_the_issuer_and_the_endpoints(idp_provider):
    doc = idp_provider.discovery()
    assert doc["issuer"] == idp_provider.issuer
    base = idp_provider.issuer
    assert doc["authorization_endpoint"] == f"{base}/auth"
    assert doc["token_endpoint"] == f"{base}/token"
    assert doc["jwks_uri"] == f"{base}/jwks"
    assert doc["end_session_endpoint"] == f"{base}/end_session"
    assert doc["code_challenge_methods_supported"] == ["S256"]  # no "plain"
    assert {"preferred_username", "groups", "email", "name"} <= set(doc["claims_supported"])


def test_jwks_holds_an_rs256_signing_key(idp_provider):
    jwks = httpx.get(idp_provider.discovery()["jwks_uri"], timeout=10).json()
    rsa = [k for k in jwks["keys"] if k["kty"] == "RSA"]
    assert rsa and rsa[0]["alg"] == "RS256" and rsa[0].get("kid")
    assert "d" not in rsa[0]  # the public half only


def test_code_flow_with_pkce_gives_a_signed_id_token_with_groups(client, stack_uris):
    redirect, _ = stack_uris
    tokens = tokens_for(client, "hpcuser", redirect)
    claims = verified_claims(client.provider, tokens["id_token"])
    assert claims["preferred_username"] == "hpcuser"
    assert claims["groups"] == ["portal-users"]
    assert claims["email"] == "hpcuser@example.org"
    assert claims["name"] == "HPC User"
    userinfo = httpx.get(
        client.provider.discovery()["userinfo_endpoint"],
        headers={"Authorization": f"Bearer {tokens['access_token']}"},
        timeout=10,
    ).json()
    assert userinfo["sub"] == claims["sub"]
    assert userinfo["preferred_username"] == "hpcuser" and userinfo["groups"] == ["portal-users"]


def test_staff_and_outsider_groups_are_in_their_tokens(idp_provider, stack_uris):
    redirect, _ = stack_uris
    for username, groups in (
        ("demo", ["portal-users", "portal-staff"]),
        ("outsider", ["visitors"]),
    ):
        c = idp.ProviderClient(idp_provider)
        try:
            claims = verified_claims(idp_provider, tokens_for(c, username, redirect)["id_token"])
        finally:
            c.close()
        assert claims["preferred_username"] == username
        assert claims["groups"] == groups


def test_a_wrong_pkce_verifier_gets_no_tokens(client, stack_uris):
    redirect, _ = stack_uris
    provider = client.provider
    _, challenge = idp.pkce_pair()
    client.sign_in("hpcuser", provider.users["hpcuser"].password)
    code = idp.query_of(authorize(client, redirect, challenge).headers["location"])["code"]
    response = httpx.post(
        provider.discovery()["token_endpoint"],
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect,
            "code_verifier": idp.pkce_pair()[0],  # another one
        },
        auth=(provider.client_id, provider.client_secret),
        timeout=15,
    )
    assert response.status_code in (400, 403)
    assert "id_token" not in response.text


def test_a_wrong_password_is_refused(client, stack_uris):
    redirect, _ = stack_uris
    assert client.sign_in("hpcuser", "not-the-password").status_code == 401
    response = authorize(client, redirect, idp.pkce_pair()[1])
    # No session: back to the provider's login page, never to the callback with a code.
    assert response.status_code == 302
    assert response.headers["location"].startswith(f"{client.provider.origin}/login.html?")


def test_only_registered_redirect_uris_get_a_code(idp_provider, client):
    base = f"http://127.0.0.1:{free_port()}"
    redirect = f"{base}{idp.CALLBACK_PATH}"
    client.sign_in("hpcuser", idp_provider.users["hpcuser"].password)
    assert authorize(client, redirect, idp.pkce_pair()[1]).status_code != 302
    with idp.redirect_uris(idp_provider, base):
        response = authorize(client, redirect, idp.pkce_pair()[1])
        assert response.status_code == 302 and "code=" in response.headers["location"]
    # removed again afterwards
    assert authorize(client, redirect, idp.pkce_pair()[1]).status_code != 302


def test_end_session_ends_the_provider_session(client, stack_uris):
    """RP-initiated logout: end_session_endpoint sends the browser to the provider's
    logout page (prompt=end_session); confirming there (what its login app does: DELETE
    the OIDC session, then the provider session) returns to post_logout_redirect_uri."""
    redirect, post_logout = stack_uris
    provider = client.provider
    tokens = tokens_for(client, "hpcuser", redirect)
    sid = verified_claims(provider, tokens["id_token"])["sid"]
    response = client.request(
        "GET",
        provider.discovery()["end_session_endpoint"],
        params={
            "id_token_hint": tokens["id_token"],
            "post_logout_redirect_uri": post_logout,
            "state": "bye",
        },
    )
    assert response.status_code == 302
    page = response.headers["location"]
    assert page.startswith(f"{provider.origin}/login.html?")
    params = idp.query_of(page)
    assert params["prompt"] == "end_session" and params["sid"] == sid
    assert params["callback_url"] == f"{post_logout}?state=bye"
    # What the page's "log out" does:
    assert client.request("DELETE", f"{provider.api}/oidc/session/{sid}").status_code == 200
    assert client.request("DELETE", f"{provider.api}/auth/").status_code == 200
    # The provider session is over: authorizing again needs the login page.
    again = authorize(client, redirect, idp.pkce_pair()[1])
    assert again.headers["location"].startswith(f"{provider.origin}/login.html?")
    # and the session's tokens are revoked.
    userinfo = httpx.get(
        provider.discovery()["userinfo_endpoint"],
        headers={"Authorization": f"Bearer {tokens['access_token']}"},
        timeout=10,
    )
    assert userinfo.status_code == 401


# --- the provider's own login page in Chromium ---------------------------------------------


@pytest.fixture
def page():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page()
        finally:
            browser.close()


def test_login_page_in_chromium_accepts_the_password_and_logs_out(idp_provider, page, stack_uris):
    """The selectors a browser test of the portal uses: #username, #password, #loginbut,
    then the "Continue" button; on the end-session page the red "Logout" button."""
    redirect, post_logout = stack_uris
    arrived: list[str] = []
    # Nothing listens on the stack's port: catch the browser's arrivals there.
    base = redirect.removesuffix(idp.CALLBACK_PATH)
    # Answered, not aborted: an aborted navigation commits a chrome-error page late enough
    # to interrupt the next goto.
    page.route(
        f"{base}/**",
        lambda route: (
            arrived.append(route.request.url),
            route.fulfill(status=200, content_type="text/plain", body="arrived"),
        ),
    )
    verifier, challenge = idp.pkce_pair()
    doc = idp_provider.discovery()
    url = httpx.URL(
        doc["authorization_endpoint"],
        params={
            "response_type": "code",
            "client_id": idp_provider.client_id,
            "redirect_uri": redirect,
            "scope": "openid profile email",
            "state": "browser-state",
            "nonce": "nonce-456",  # glewlwyd requires one, also in the code flow
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        },
    )
    page.goto(str(url))
    page.fill("#username", "hpcuser")
    page.fill("#password", "not-the-password")
    page.click("#loginbut")
    page.wait_for_timeout(500)
    assert not page.get_by_role("button", name="Continue").is_visible()
    page.fill("#password", idp_provider.users["hpcuser"].password)
    page.click("#loginbut")
    page.get_by_role("button", name="Continue").click()
    wait_for(page, arrived, 1)
    query = idp.query_of(arrived[0])
    assert arrived[0].startswith(redirect + "?") and query["state"] == "browser-state"
    tokens = httpx.post(
        doc["token_endpoint"],
        data={
            "grant_type": "authorization_code",
            "code": query["code"],
            "redirect_uri": redirect,
            "code_verifier": verifier,
        },
        auth=(idp_provider.client_id, idp_provider.client_secret),
        timeout=15,
    ).json()
    assert verified_claims(idp_provider, tokens["id_token"])["preferred_username"] == "hpcuser"

    end_session = httpx.URL(
        doc["end_session_endpoint"],
        params={
            "id_token_hint": tokens["id_token"],
            "post_logout_redirect_uri": post_logout,
            "state": "bye",
        },
    )
    page.goto(str(end_session))
    page.click('button.btn-danger:has-text("Logout")')
    wait_for(page, arrived, 2)
    assert arrived[1] == f"{post_logout}?state=bye"
    page.goto(str(url))  # signed out at the provider: the login form again
    page.wait_for_selector("#password")


def wait_for(page, arrived: list[str], count: int) -> None:
    deadline = time.monotonic() + 10
    while len(arrived) < count and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    assert len(arrived) >= count, page.url
    # The route saw the request; the navigation commits after it. Going on
    # before it commits lets it interrupt the test's next page.goto.
    page.wait_for_url(arrived[count - 1])
    page.wait_for_load_state()
