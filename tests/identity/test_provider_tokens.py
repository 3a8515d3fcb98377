"""JWT access tokens from the OIDC provider, accepted by the API as a second way for
scripts: verified against the provider's JWKS over real HTTP (tests/oidcprovider.py)."""

from __future__ import annotations

import time

import pytest

from identity import provider as portal_provider
from tests import factories, oidcprovider
from tests.oidcprovider import CLIENT_ID, ec_key, rsa_key, sign

pytestmark = pytest.mark.django_db


AUD = "https://portal.example.org"


@pytest.fixture
def oidc(oidc_test_provider, settings, owner):
    with oidcprovider.portal_uses(
        oidc_test_provider, settings, PORTAL_OIDC_API_AUDIENCE=AUD
    ) as idp:
        factories.identity(owner, idp.issuer, idp.claims["sub"])
        yield idp


def status(token: str, method: str = "get", path: str = "/api/v1/jobs/") -> int:
    return getattr(factories.bearer_client(token), method)(path).status_code


def test_a_provider_access_token_for_the_portal_is_accepted(oidc, owner, cluster):
    job = factories.job(owner, cluster)
    client = factories.bearer_client(oidc.access_token(aud=AUD))
    response = client.get("/api/v1/jobs/")
    assert response.status_code == 200 and response.json()["results"][0]["id"] == job.pk


@pytest.mark.parametrize(
    "claims",
    [
        pytest.param({"aud": CLIENT_ID}, id="other-audience"),
        pytest.param({"aud": AUD, "iss": "http://127.0.0.1:1/evil"}, id="other-issuer"),
        pytest.param({"aud": AUD, "exp": int(time.time()) - 3600}, id="expired"),
        pytest.param({"aud": AUD, "nbf": int(time.time()) + 3600}, id="not-yet-valid"),
        pytest.param({"aud": AUD, "sub": "someone-else"}, id="no-portal-user"),
    ],
)
def test_provider_tokens_that_do_not_fit_are_refused(oidc, claims):
    assert status(oidc.access_token(**claims)) == 401


def test_a_token_signed_with_an_unknown_or_forged_key_is_refused(oidc):
    claims = {
        "iss": oidc.issuer,
        "sub": oidc.claims["sub"],
        "aud": AUD,
        "exp": int(time.time()) + 60,
    }
    assert status(sign(claims, rsa_key("never-published"))) == 401
    assert status(sign(claims, rsa_key("key-1"))) == 401  # the published kid, another key
    assert status(sign(claims, ec_key("key-ec"))) == 401


def test_a_rotated_key_is_fetched_once_and_unknown_kids_do_not_flood_the_provider(oidc):
    assert status(oidc.access_token(aud=AUD)) == 200
    oidc.signing_key = ec_key("key-2")
    oidc.published.append(oidc.signing_key)
    # Fetched within the last JWKS_REFETCH seconds: not again yet.
    assert status(oidc.access_token(aud=AUD)) == 401
    portal_provider._keys[oidc.issuer].fetched_at -= portal_provider.JWKS_REFETCH + 1
    fetched = oidc.jwks_fetches
    assert status(oidc.access_token(aud=AUD)) == 200
    for _ in range(5):
        assert status(sign({"sub": "x"}, rsa_key("made-up"))) == 401
    assert oidc.jwks_fetches == fetched + 1


def test_a_token_of_a_deactivated_person_is_refused(oidc, owner):
    owner.is_active = False
    owner.save()
    assert status(oidc.access_token(aud=AUD)) == 401


def test_the_scope_claim_grants_portal_scopes(oidc, owner, cluster, monkeypatch):
    from jobs import tasks

    monkeypatch.setattr(tasks.cancel_job, "delay", lambda *a: None)
    job = factories.job(owner, cluster, state="running", scheduler_job_id="9")
    cancel = f"/api/v1/jobs/{job.pk}/cancel/"
    assert status(oidc.access_token(aud=AUD, scope="openid"), "post", cancel) == 403
    assert status(oidc.access_token(aud=AUD, scope="openid"), "get") == 200  # none: read
    assert status(oidc.access_token(aud=AUD, scope="portal:read"), "post", cancel) == 403
    assert status(oidc.access_token(aud=AUD, scope="portal:submit"), "post", cancel) in (200, 202)


def test_with_oidc_off_a_jwt_is_just_an_unknown_token(oidc, settings):
    token = oidc.access_token(aud=AUD)
    settings.PORTAL_OIDC_ISSUER = ""
    assert status(token) == 401


# --- the browser's rules on the token's own claims; id tokens are not access tokens ------


def test_an_id_token_is_refused_as_a_bearer_token(oidc):
    assert status(oidc.access_token(aud=AUD, nonce="n-1")) == 401  # a nonce: an id token
    assert status(oidc.access_token(aud=AUD, typ="JWT")) == 401  # typed, not at+jwt
    assert status(oidc.access_token(aud=AUD, typ="application/at+jwt")) == 200
    assert status(oidc.access_token(aud=AUD, typ=None)) == 200  # untyped: other checks


def test_an_api_audience_equal_to_the_client_id_takes_no_token(oidc, settings):
    """The portal's own id tokens name the client id: that audience is never the API's."""
    settings.PORTAL_OIDC_API_AUDIENCE = CLIENT_ID
    assert status(oidc.access_token(aud=CLIENT_ID)) == 401
    settings.PORTAL_OIDC_API_AUDIENCE = ""
    assert status(oidc.access_token(aud="")) == 401


def test_a_token_without_an_allowed_group_is_refused(oidc, settings):
    settings.PORTAL_OIDC_ALLOWED_GROUPS = ["hpc-users"]
    assert status(oidc.access_token(aud=AUD)) == 401  # no groups claim
    assert status(oidc.access_token(aud=AUD, groups=["alumni"])) == 401
    assert status(oidc.access_token(aud=AUD, groups=["hpc-users"])) == 200


def test_staff_powers_need_the_staff_group_in_the_token(oidc, settings, owner):
    from rest_framework.test import APIRequestFactory

    from identity.api_auth import ProviderTokenAuthentication
    from identity.tokens import ADMIN

    owner.is_staff = owner.is_superuser = True
    owner.save()
    settings.PORTAL_OIDC_STAFF_GROUPS = ["hpc-admins"]

    def user_for(token: str):
        request = APIRequestFactory().get("/api/v1/jobs/", HTTP_AUTHORIZATION=f"Bearer {token}")
        user, _ = ProviderTokenAuthentication().authenticate(request)
        return user

    plain = user_for(oidc.access_token(aud=AUD, scope="portal:admin", groups=["hpc-users"]))
    assert not plain.is_staff and not plain.is_superuser and ADMIN not in plain.api_scopes
    staff = user_for(oidc.access_token(aud=AUD, scope="portal:admin", groups=["hpc-admins"]))
    assert staff.is_staff and ADMIN in staff.api_scopes
    owner.refresh_from_db()
    assert owner.is_staff and owner.is_superuser  # a request's view, the row is unchanged


def test_required_acr_and_amr_apply_to_tokens(oidc, settings):
    settings.PORTAL_OIDC_REQUIRE_ACR = ["urn:mfa"]
    assert status(oidc.access_token(aud=AUD)) == 401
    assert status(oidc.access_token(aud=AUD, acr="urn:password")) == 401
    assert status(oidc.access_token(aud=AUD, acr="urn:mfa")) == 200
    settings.PORTAL_OIDC_REQUIRE_ACR = []
    settings.PORTAL_OIDC_REQUIRE_AMR = ["otp"]
    assert status(oidc.access_token(aud=AUD, amr=["pwd"])) == 401
    assert status(oidc.access_token(aud=AUD, amr=["pwd", "otp"])) == 200
