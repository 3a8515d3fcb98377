"""tasks.reconfirm_identities: a refresh token re-confirms a person the provider still
vouches for, in the allowed groups; out of them the person is withdrawn; a refused
refresh leaves them to age out. Against tests/oidcprovider.py over real HTTP."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from identity import confirmation
from identity.models import Identity
from identity.tasks import reconfirm_identities
from identity.tokens import ApiToken
from tests import factories, oidcprovider

pytestmark = pytest.mark.django_db

HOUR = 3600


@pytest.fixture
def oidc(oidc_test_provider, settings):
    with oidcprovider.portal_uses(
        oidc_test_provider,
        settings,
        PORTAL_OIDC_CONFIRM_MAX_AGE=10 * HOUR,
        PORTAL_OIDC_ALLOWED_GROUPS=["hpc-users"],
        PORTAL_OIDC_STAFF_GROUPS=["hpc-admins"],
    ) as idp:
        yield idp


@pytest.fixture
def person(oidc, owner):
    """owner, confirmed 6 hours ago (past half the age), with a refresh token."""
    oidc.refresh_tokens.add("rt-1")
    factories.identity(
        owner, oidc.issuer, oidc.claims["sub"], confirmed_ago=6 * HOUR, refresh_token="rt-1"
    )
    return owner


def identity_of(user) -> Identity:
    return Identity.objects.get(user=user)


def test_a_person_still_allowed_is_confirmed_again_with_the_providers_groups(oidc, person):
    oidc.claims["groups"] = ["hpc-users", "hpc-admins"]
    assert reconfirm_identities() == {"confirmed": 1, "refused": 0, "failed": 0}
    identity = identity_of(person)
    assert identity.confirmed_at is not None
    assert (timezone.now() - identity.confirmed_at).total_seconds() < 30
    assert identity.groups == ["hpc-admins", "hpc-users"]
    person.refresh_from_db()
    assert person.is_staff  # flags follow the refreshed groups as at a sign-in
    # Fresh now: not asked again until half the age has passed.
    asked = oidc.refreshes
    reconfirm_identities()
    assert oidc.refreshes == asked


def test_a_person_moved_out_of_the_allowed_groups_is_withdrawn_and_stays_out(oidc, person):
    _, token = ApiToken.issue(person, "laptop")
    browser = Client()
    browser.force_login(person)
    oidc.claims["groups"] = ["alumni"]
    assert reconfirm_identities()["refused"] == 1
    identity = identity_of(person)
    assert identity.confirmed_at is None and identity.refresh_token_encrypted == ""
    assert not confirmation.is_current(person)
    assert not ApiToken.objects.usable().filter(user=person).exists()
    assert "_auth_user_id" not in Client().session
    assert browser.get("/").status_code == 302  # the session is over
    # Back in the group at the provider: no refresh token re-admits them; a sign-in must.
    oidc.claims["groups"] = ["hpc-users"]
    asked = oidc.refreshes
    reconfirm_identities()
    assert oidc.refreshes == asked and not confirmation.is_current(person)


def test_a_refused_refresh_token_is_dropped_and_the_person_ages_out(oidc, person):
    oidc.refresh_tokens.clear()  # disabled at the provider: its tokens no longer refresh
    assert reconfirm_identities()["refused"] == 1
    identity = identity_of(person)
    assert identity.refresh_token_encrypted == ""
    assert confirmation.is_current(person)  # still within the age ...
    factories.identity(person, identity.issuer, identity.subject, confirmed_ago=11 * HOUR)
    assert not confirmation.is_current(person)  # ... and not past it


def test_an_unreachable_provider_changes_nothing(oidc, person, settings):
    settings.PORTAL_OIDC_ISSUER = "http://127.0.0.1:9"  # nothing listens
    before = identity_of(person)
    assert reconfirm_identities()["failed"] == 1
    after = identity_of(person)
    assert (after.confirmed_at, after.refresh_token_encrypted) == (
        before.confirmed_at,
        before.refresh_token_encrypted,
    )


def test_a_logout_while_the_provider_answers_is_not_undone(oidc, person, monkeypatch):
    """The refresh answer arrives after a back-channel logout cleared the confirmation:
    the conditional update leaves it cleared."""
    from identity import provider

    real = provider.refresh_userinfo

    def logout_meanwhile(token):
        answer = real(token)
        confirmation.unconfirm(person)
        return answer

    monkeypatch.setattr(provider, "refresh_userinfo", logout_meanwhile)
    reconfirm_identities()
    assert identity_of(person).confirmed_at is None


def test_with_refresh_confirmation_off_nothing_is_kept_or_asked(oidc, person, settings):
    """For a provider that keeps answering a disabled person's refresh tokens."""
    settings.PORTAL_OIDC_REFRESH_CONFIRMS = False
    asked = oidc.refreshes
    assert reconfirm_identities() == {"confirmed": 0, "refused": 0, "failed": 0}
    assert oidc.refreshes == asked
    client = Client()
    start = client.get("/oidc/login/")
    code, state = oidc.authorize(start["Location"])
    assert client.get("/oidc/callback/", {"code": code, "state": state}).status_code == 302
    assert identity_of(person).refresh_token_encrypted == ""
