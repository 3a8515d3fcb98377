"""/oidc/backchannel-logout/ (OpenID Connect Back-Channel Logout 1.0): a logout token from
the provider ends every portal session of its person and clears their confirmation; a
token that is not one changes nothing. Keys from tests/oidcprovider.py over real HTTP."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from identity.models import Identity
from identity.tokens import ApiToken
from tests import factories, oidcprovider
from tests.oidcprovider import rsa_key, sign

pytestmark = pytest.mark.django_db

URL = "/oidc/backchannel-logout/"


@pytest.fixture
def oidc(oidc_test_provider, settings):
    with oidcprovider.portal_uses(
        oidc_test_provider, settings, PORTAL_OIDC_ALLOWED_GROUPS=["hpc-users"]
    ) as idp:
        yield idp


def post(token: str):
    return Client(enforce_csrf_checks=True).post(URL, {"logout_token": token})


def test_a_logout_token_ends_every_session_of_its_person(oidc):
    laptop, desktop = oidcprovider.sign_in(oidc), oidcprovider.sign_in(oidc)
    identity = Identity.objects.get()
    _, token = ApiToken.issue(identity.user, "ci")
    response = post(oidc.logout_token())
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    for browser in (laptop, desktop):
        assert browser.get("/").status_code == 302
        assert "_auth_user_id" not in browser.session
    identity.refresh_from_db()
    assert identity.confirmed_at is None
    assert factories.bearer_client(token).get("/api/v1/jobs/").status_code == 401
    # A new sign-in works, and the old sessions stay ended.
    again = oidcprovider.sign_in(oidc)
    assert again.get("/").status_code == 200
    assert laptop.get("/").status_code == 302


def test_a_logout_token_naming_only_the_session_ends_it(oidc):
    oidc.claims["sid"] = "session-77"
    browser = oidcprovider.sign_in(oidc)
    assert post(oidc.logout_token(sub=None, sid="session-77")).status_code == 200
    assert browser.get("/").status_code == 302


@pytest.mark.parametrize(
    "claims",
    [
        pytest.param({"nonce": "n"}, id="nonce-an-id-token"),
        pytest.param({"events": None}, id="no-event"),
        pytest.param({"events": {"http://example.org/other": {}}}, id="other-event"),
        pytest.param({"aud": "another-client"}, id="other-audience"),
        pytest.param({"iss": "http://127.0.0.1:1/evil"}, id="other-issuer"),
        pytest.param({"iat": int(time.time()) - 3600}, id="old"),
        pytest.param({"iat": None}, id="no-iat"),
        pytest.param({"jti": None}, id="no-jti"),
        pytest.param({"sub": None}, id="neither-sub-nor-sid"),
        pytest.param({"exp": int(time.time()) - 600}, id="expired"),
    ],
)
def test_a_token_that_is_no_logout_token_changes_nothing(oidc, claims):
    browser = oidcprovider.sign_in(oidc)
    assert post(oidc.logout_token(**claims)).status_code == 400
    assert browser.get("/").status_code == 200
    assert Identity.objects.get().confirmed_at is not None


def test_a_forged_or_replayed_token_changes_nothing(oidc):
    browser = oidcprovider.sign_in(oidc)
    forged = dict(
        iss=oidc.issuer,
        aud=oidcprovider.CLIENT_ID,
        sub=oidc.claims["sub"],
        iat=int(time.time()),
        jti="j-1",
        events={"http://schemas.openid.net/event/backchannel-logout": {}},
    )
    assert post(sign(forged, rsa_key("key-1"))).status_code == 400  # published kid, other key
    assert browser.get("/").status_code == 200
    token = oidc.logout_token()
    assert post(token).status_code == 200
    again = oidcprovider.sign_in(oidc)
    assert post(token).status_code == 400  # used once
    assert again.get("/").status_code == 200


def test_with_oidc_off_there_is_no_endpoint(settings):
    settings.PORTAL_OIDC_ISSUER = ""
    assert Client().post(URL, {"logout_token": "x"}).status_code == 404
