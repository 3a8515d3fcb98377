"""Access follows the provider: past PORTAL_OIDC_CONFIRM_MAX_AGE since the provider last
vouched for a person, their browser sessions and cluster actions stop (API tokens:
tests/jobs/api/test_stale_tokens.py) until they sign in again."""

from __future__ import annotations

import pytest
from django.test import Client

from clusters import pool, ssh
from identity import audit, confirmation
from tests import factories

pytestmark = pytest.mark.django_db

ISSUER = "https://idp.example.org"
HOUR = 3600


@pytest.fixture
def oidc_on(settings):
    settings.PORTAL_OIDC_ISSUER = ISSUER
    settings.PORTAL_OIDC_CLIENT_ID = "portal"
    settings.PORTAL_OIDC_CONFIRM_MAX_AGE = 10 * HOUR
    settings.PORTAL_LOCAL_LOGIN_USERS = ["rescue"]


def test_a_confirmation_within_the_age_is_current_and_an_older_one_is_not(oidc_on, owner):
    identity = factories.identity(owner, ISSUER, "s-1", confirmed_ago=9 * HOUR)
    assert confirmation.is_current(owner) and confirmation.stale(owner) is None
    factories.identity(owner, ISSUER, "s-1", confirmed_ago=11 * HOUR)
    assert not confirmation.is_current(owner)
    assert confirmation.stale(owner) == (
        "owner's sign-in at the identity provider is older than 10 hours (or was ended "
        "there): sign in to the portal again."
    )
    with pytest.raises(confirmation.Stale):
        confirmation.require(owner)
    factories.identity(owner, ISSUER, "s-1", confirmed_ago=None)  # never / ended
    assert not confirmation.is_current(owner)
    assert identity.user == owner


def test_everyone_is_current_with_oidc_off(settings, owner):
    settings.PORTAL_OIDC_ISSUER = ""
    factories.identity(owner, ISSUER, "s-1", confirmed_ago=None)
    assert confirmation.is_current(owner)
    assert confirmation.is_current(factories.user("local"))


def test_only_emergency_admins_without_an_identity_need_no_provider(oidc_on):
    rescue = factories.user("rescue", "rescue-pass-123", superuser=True)
    assert confirmation.is_current(rescue)
    # A local account from before OIDC was on, not an emergency admin: not current.
    assert not confirmation.is_current(factories.user("old-local", "pass-123-abc"))
    # The emergency admin's name with an identity at the provider: its age counts.
    factories.identity(rescue, ISSUER, "s-rescue", confirmed_ago=None)
    assert not confirmation.is_current(rescue)


def test_a_stale_browser_session_is_ended_and_sent_to_sign_in(oidc_on, owner):
    factories.identity(owner, ISSUER, "s-1", confirmed_ago=HOUR)
    client = Client()
    client.force_login(owner)
    assert client.get("/").status_code == 200
    factories.identity(owner, ISSUER, "s-1", confirmed_ago=11 * HOUR)
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert "_auth_user_id" not in client.session
    # Signed in again (confirmed now): a new session works.
    factories.identity(owner, ISSUER, "s-1", confirmed_ago=0)
    client.force_login(owner)
    assert client.get("/").status_code == 200


def test_the_emergency_admins_session_is_kept(oidc_on):
    rescue = factories.user("rescue", "rescue-pass-123", superuser=True)
    client = Client()
    client.force_login(rescue)
    assert client.get("/").status_code == 200


def test_a_browser_session_lasts_a_working_day_by_default():
    from django.conf import settings

    assert settings.SESSION_COOKIE_AGE == settings.PORTAL_OIDC_CONFIRM_MAX_AGE == 10 * HOUR


def test_no_cluster_key_or_certificate_for_a_stale_person(oidc_on, owner, cluster):
    account = factories.account(cluster, owner, "owner")
    account.generate_key_pair()
    account.save()
    factories.identity(owner, ISSUER, "s-1", confirmed_ago=HOUR)
    with audit.action(audit.Action.ACCOUNT_TEST, user=owner, account=account):
        assert ssh.account_key(account) is not None
    factories.identity(owner, ISSUER, "s-1", confirmed_ago=11 * HOUR)
    with audit.action(audit.Action.ACCOUNT_TEST, user=owner, account=account):  # their own
        with pytest.raises(
            ssh.AuthenticationFailed, match="older than 10 hours: sign in|older than 10 hours"
        ):
            ssh.account_key(account)
        # An open pooled connection (its certificate still valid) is not used either.
        with pytest.raises(ssh.AuthenticationFailed, match="sign in to the portal again"):
            pool.get(account)
    # The portal's bookkeeping for their jobs already running goes on (no one asked), and
    # so do other people's actions on it (staff cancelling): jobs reach their final state.
    assert ssh.account_key(account) is not None
    staff = factories.user("staffer", superuser=True)
    with audit.action(audit.Action.CANCEL, user=staff, account=account):
        assert ssh.account_key(account) is not None


def test_the_service_account_is_not_a_person(oidc_on, cluster):
    account = factories.account(cluster, None, "svc")
    account.generate_key_pair()
    account.save()
    assert ssh.account_key(account) is not None


@pytest.mark.django_db(transaction=True)
def test_a_stale_persons_websocket_is_refused(oidc_on, owner):
    from tests.sockets import connect, run, session_cookie

    factories.identity(owner, ISSUER, "s-1", confirmed_ago=HOUR)
    cookie = session_cookie(owner)

    async def opened() -> bool:
        communicator, connected, _ = await connect("/ws/notifications/", cookie)
        if connected:
            await communicator.disconnect()
        return connected

    assert run(opened())
    factories.identity(owner, ISSUER, "s-1", confirmed_ago=11 * HOUR)
    assert not run(opened())
