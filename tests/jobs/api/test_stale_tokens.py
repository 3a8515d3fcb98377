"""API tokens follow the provider: with OIDC on, a personal token (pp_) and a provider JWT
work only while their person's confirmation is current (identity/confirmation.py)."""

from __future__ import annotations

import pytest

from identity.tokens import ApiToken
from tests import factories, oidcprovider

pytestmark = pytest.mark.django_db

AUD = "https://portal.example.org"
HOUR = 3600


@pytest.fixture
def oidc(oidc_test_provider, settings):
    with oidcprovider.portal_uses(
        oidc_test_provider,
        settings,
        PORTAL_OIDC_API_AUDIENCE=AUD,
        PORTAL_OIDC_CONFIRM_MAX_AGE=10 * HOUR,
        PORTAL_LOCAL_LOGIN_USERS=["rescue"],
    ) as idp:
        yield idp


def test_a_personal_token_stops_when_the_confirmation_is_too_old(oidc, owner):
    identity = factories.identity(owner, oidc.issuer, oidc.claims["sub"], confirmed_ago=HOUR)
    _, token = ApiToken.issue(owner, "laptop")
    client = factories.bearer_client(token)
    assert client.get("/api/v1/jobs/").status_code == 200
    factories.identity(owner, identity.issuer, identity.subject, confirmed_ago=11 * HOUR)
    response = client.get("/api/v1/jobs/")
    assert response.status_code == 401
    assert "older than 10 hours" in response.content.decode()
    # Signed in again: the same token works again (it was not revoked, only waiting).
    factories.identity(owner, identity.issuer, identity.subject, confirmed_ago=0)
    assert client.get("/api/v1/jobs/").status_code == 200


def test_a_provider_jwt_stops_too(oidc, owner):
    factories.identity(owner, oidc.issuer, oidc.claims["sub"], confirmed_ago=11 * HOUR)
    client = factories.bearer_client(oidc.access_token(aud=AUD))
    assert client.get("/api/v1/jobs/").status_code == 401


def test_a_local_token_without_an_identity_stops_unless_an_emergency_admin(oidc, owner):
    client = factories.api_client(owner)
    assert client.get("/api/v1/jobs/").status_code == 401
    rescue = factories.user("rescue", "rescue-pass-123", superuser=True)
    assert factories.api_client(rescue).get("/api/v1/jobs/").status_code == 200


def test_with_oidc_off_tokens_do_not_age(settings, owner):
    settings.PORTAL_OIDC_ISSUER = ""
    assert factories.api_client(owner).get("/api/v1/jobs/").status_code == 200
