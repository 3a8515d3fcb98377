"""OIDC sign-in end to end through the portal's views: Django's test client, the portal's
Authlib client and a real provider (tests/oidcprovider.py: HTTP in a thread, real RSA/EC
keys). The browser only carries redirects; each test answers the authorization request as
the provider's login page would and calls the callback."""

from __future__ import annotations

import base64
import json
import time
from urllib.parse import parse_qs, urlparse

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from clusters.models import ClusterAccount
from common import crypto
from identity.models import Identity
from identity.tokens import ApiToken
from tests import factories, oidcprovider
from tests.oidcprovider import CLIENT_ID, Provider, ec_key, rsa_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def oidc(oidc_test_provider, settings):
    """OIDC on, pointed at the test provider (only for the test that asks)."""
    with oidcprovider.portal_uses(
        oidc_test_provider,
        settings,
        PORTAL_OIDC_PROVIDER_NAME="Test IdP",
        PORTAL_OIDC_API_AUDIENCE="https://portal.example.org",
        PORTAL_OIDC_ALLOWED_GROUPS=["hpc-users"],
        PORTAL_OIDC_STAFF_GROUPS=["hpc-admins"],
        PORTAL_LOCAL_LOGIN_USERS=["rescue"],
    ) as idp:
        yield idp


def flow(client: Client, idp: Provider, **login_query):
    """/oidc/login/ -> the provider -> /oidc/callback/: the callback's response."""
    start = client.get("/oidc/login/", login_query)
    assert start.status_code == 302, start.content
    code, state = idp.authorize(start["Location"])
    return client.get("/oidc/callback/", {"code": code, "state": state})


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def assert_refused(response, client: Client, text: str = "could not be verified") -> None:
    assert response.status_code == 403
    assert text in response.content.decode()
    assert not signed_in(client)


def test_first_sign_in_creates_the_user_identity_and_cluster_account(oidc):
    allowed = factories.cluster("alpha", user_map="{preferred_username}")
    factories.cluster("beta", user_map="{preferred_username}", allowed_groups="beta-users")
    client = Client()
    response = flow(client, oidc, next="/launch/")
    assert response.status_code == 302 and response["Location"] == "/launch/"
    user = get_user_model().objects.get(username="ada")
    assert (user.first_name, user.last_name, user.email) == ("Ada", "Lovelace", "ada@example.org")
    assert not user.has_usable_password() and not user.is_staff
    assert Identity.objects.get(user=user).subject == "subject-123"
    account = ClusterAccount.objects.get(user=user)
    assert (account.cluster, account.username) == (allowed, "ada")
    assert account.public_key.startswith("ssh-ed25519 ")  # made as the account page does
    assert signed_in(client)
    # PKCE, state and nonce went to the provider.
    request = oidc.authorize_requests[0]
    assert request["nonce"] and request["state"] and request["code_challenge_method"] == "S256"
    assert request["redirect_uri"] == "http://testserver/oidc/callback/"


def test_a_renamed_person_stays_the_same_user_with_current_name_and_email(oidc):
    client = Client()
    assert flow(client, oidc).status_code == 302
    first = get_user_model().objects.get(username="ada")
    oidc.claims.update(
        preferred_username="ada.king", email="ada@king.example", groups=["hpc-users", "hpc-admins"]
    )
    assert flow(Client(), oidc).status_code == 302
    first.refresh_from_db()
    assert (first.username, first.email, first.is_staff) == ("ada.king", "ada@king.example", True)
    assert get_user_model().objects.count() == 1


def test_only_allowlisted_django_groups_follow_the_provider_groups(oidc, settings):
    """Permissions come from Django groups; a provider group becomes a membership only when
    PORTAL_OIDC_DJANGO_GROUPS names it (exactly or by prefix), at every sign-in, and the
    groups an admin gave outside that list stay."""
    admins = Group.objects.create(name="hpc-admins")
    wheel = Group.objects.create(name="wheel")  # same name at the provider, not allowlisted
    local = Group.objects.create(name="local-only")
    oidc.claims.update(groups=["hpc-users", "hpc-admins", "wheel"])
    assert flow(Client(), oidc).status_code == 302
    user = get_user_model().objects.get(username="ada")
    assert list(user.groups.all()) == []  # no allowlist: no provider group counts
    settings.PORTAL_OIDC_DJANGO_GROUPS = ["hpc-*"]
    user.groups.add(local)  # an admin's choice
    assert flow(Client(), oidc).status_code == 302
    assert set(user.groups.all()) == {admins, local} and user.is_staff
    assert wheel not in user.groups.all()
    oidc.claims.update(groups=["hpc-users"])  # left hpc-admins at the provider
    assert flow(Client(), oidc).status_code == 302
    user.refresh_from_db()
    assert list(user.groups.all()) == [local] and not user.is_staff


def test_staff_and_superuser_flags_are_recomputed_and_an_unset_list_means_no(oidc, settings):
    """A portal superuser linked to the provider by an admin is a superuser only while a
    superuser group says so; with no superuser group set, nobody is one."""
    boss = factories.user("ada", "ada-pass-123", superuser=True)
    assert boss.is_superuser and boss.is_staff
    factories.identity(boss, oidc.issuer, "subject-123")  # the admin's link
    settings.PORTAL_OIDC_STAFF_GROUPS = []
    assert flow(Client(), oidc).status_code == 302
    boss.refresh_from_db()
    assert not boss.is_superuser and not boss.is_staff
    settings.PORTAL_OIDC_SUPERUSER_GROUPS = ["hpc-root"]
    oidc.claims["groups"] = ["hpc-users", "hpc-root"]
    assert flow(Client(), oidc).status_code == 302
    boss.refresh_from_db()
    assert boss.is_superuser and boss.is_staff


def test_a_sign_in_confirms_the_identity_with_its_groups_and_keeps_the_refresh_token(oidc):
    assert flow(Client(), oidc).status_code == 302
    identity = Identity.objects.get(subject="subject-123")
    assert identity.confirmed_at is not None
    assert (timezone.now() - identity.confirmed_at).total_seconds() < 30
    assert identity.groups == ["hpc-users"]
    assert crypto.decrypt(identity.refresh_token_encrypted) in oidc.refresh_tokens
    assert identity.refresh_token_encrypted not in oidc.refresh_tokens  # encrypted at rest


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"forge": True}, id="forged-signature"),
        pytest.param({"tweak": {"exp": int(time.time()) - 3600}}, id="expired"),
        # Authlib alone would accept this one: azp names us, aud does not (provider.py).
        pytest.param({"tweak": {"aud": "another-app", "azp": CLIENT_ID}}, id="other-audience"),
        pytest.param({"tweak": {"aud": [CLIENT_ID, "another-app"]}}, id="two-audiences-no-azp"),
        pytest.param({"tweak": {"iss": "http://127.0.0.1:1/evil"}}, id="other-issuer"),
        pytest.param({"unknown_key": True}, id="unknown-key"),
        pytest.param({"alg_none": True}, id="alg-none"),
    ],
)
def test_bad_id_tokens_are_refused_with_no_session_and_no_user(oidc, change):
    if change.get("forge"):
        # Same kid as the published key, other key material.
        oidc.signing_key = rsa_key("key-1")
    if change.get("unknown_key"):
        oidc.signing_key = rsa_key("never-published")
    oidc.tweak = change.get("tweak", {})
    if change.get("alg_none"):

        def b64(data: dict) -> str:
            return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

        now = int(time.time())
        claims = {"iss": oidc.issuer, "aud": CLIENT_ID, "iat": now, "exp": now + 300}
        oidc.replay = b64({"alg": "none"}) + "." + b64({**oidc.claims, **claims}) + "."
    client = Client()
    assert_refused(flow(client, oidc), client)
    assert not get_user_model().objects.exists()


def test_a_replayed_id_token_is_refused_for_the_next_sign_in(oidc):
    assert flow(Client(), oidc).status_code == 302
    oidc.replay = oidc.issued[-1]  # valid, signed, unexpired: but the first flow's nonce
    client = Client()
    assert_refused(flow(client, oidc), client)


def test_a_callback_with_a_forged_state_is_refused(oidc):
    client = Client()
    start = client.get("/oidc/login/")
    code, _ = oidc.authorize(start["Location"])
    assert_refused(client.get("/oidc/callback/", {"code": code, "state": "made-up"}), client)


def test_a_rotated_signing_key_is_fetched_and_accepted(oidc):
    assert flow(Client(), oidc).status_code == 302
    fetched = oidc.jwks_fetches
    oidc.signing_key = ec_key("key-2")
    oidc.published = [oidc.signing_key]  # the old key is retired
    client = Client()
    assert flow(client, oidc).status_code == 302
    assert signed_in(client) and oidc.jwks_fetches == fetched + 1


def test_a_person_outside_the_allowed_groups_gets_the_refusal_page_and_no_account(oidc):
    oidc.claims["groups"] = ["students"]
    client = Client()
    assert_refused(flow(client, oidc), client, "not in a group that may use this portal")
    assert not get_user_model().objects.exists()


def test_leaving_the_allowed_groups_revokes_every_token_and_cluster_account(oidc):
    factories.cluster("alpha", user_map="{preferred_username}")
    assert flow(Client(), oidc).status_code == 302
    user = get_user_model().objects.get(username="ada")
    ApiToken.issue(user, "laptop")
    ApiToken.issue(user, "ci")
    oidc.claims["groups"] = ["alumni"]
    client = Client()
    assert_refused(flow(client, oidc), client, "not in a group")
    assert not ApiToken.objects.usable().filter(user=user).exists()
    account = ClusterAccount.objects.get(user=user)
    assert account.disabled_at is not None
    assert ClusterAccount.for_user(account.cluster, user) is None


def test_a_cluster_the_groups_no_longer_allow_is_disabled_keeping_the_account(oidc):
    gpu = factories.cluster("gpu", user_map="{preferred_username}", allowed_groups="gpu-users")
    factories.partition(gpu, "cpu")
    oidc.claims["groups"] = ["hpc-users", "gpu-users"]
    assert flow(Client(), oidc).status_code == 302
    user = get_user_model().objects.get(username="ada")
    job = factories.job(user, gpu, cluster_account=ClusterAccount.for_user(gpu, user))
    oidc.claims["groups"] = ["hpc-users"]
    assert flow(Client(), oidc).status_code == 302
    assert ClusterAccount.for_user(gpu, user) is None
    page = Client()
    page.force_login(user)
    assert "data-account-disabled" in page.get("/account/").content.decode()
    job.refresh_from_db()
    assert job.cluster_account is not None and job.cluster_account.disabled_at is not None
    oidc.claims["groups"] = ["hpc-users", "gpu-users"]  # back again: usable again
    assert flow(Client(), oidc).status_code == 302
    assert ClusterAccount.for_user(gpu, user) == job.cluster_account


def test_a_required_acr_is_asked_for_and_enforced(oidc, settings):
    settings.PORTAL_OIDC_REQUIRE_ACR = ["urn:mfa"]
    oidc.claims["acr"] = "urn:password"
    client = Client()
    assert_refused(flow(client, oidc), client, "stronger sign-in")
    assert oidc.authorize_requests[-1]["acr_values"] == "urn:mfa"
    oidc.claims["acr"] = "urn:mfa"
    assert flow(client, oidc).status_code == 302 and signed_in(client)


def test_a_required_amr_is_enforced(oidc, settings):
    settings.PORTAL_OIDC_REQUIRE_AMR = ["otp", "hwk"]
    oidc.claims["amr"] = ["pwd"]
    client = Client()
    assert_refused(flow(client, oidc), client, "second factor")
    oidc.claims["amr"] = ["pwd", "otp"]
    assert flow(client, oidc).status_code == 302


def test_local_passwords_are_refused_except_for_the_listed_users(oidc):
    factories.user("owner", "owner-pass-123")
    factories.user("rescue", "rescue-pass-123", superuser=True)
    client = Client()
    page = client.get("/accounts/login/").content.decode()
    assert "Sign in with Test IdP" in page and 'name="password"' not in page
    assert 'name="password"' in client.get("/accounts/login/?local=1").content.decode()
    refused = client.post("/accounts/login/", {"username": "owner", "password": "owner-pass-123"})
    assert refused.status_code == 200 and "passwords are off" in refused.content.decode()
    assert not signed_in(client)
    admin = client.post("/admin/login/", {"username": "owner", "password": "owner-pass-123"})
    assert admin.status_code == 200 and not signed_in(client)
    rescue = client.post("/accounts/login/", {"username": "rescue", "password": "rescue-pass-123"})
    assert rescue.status_code == 302 and signed_in(client)


def test_logout_ends_the_session_and_sends_the_browser_to_the_provider(oidc, settings):
    """No id token in the URL (browser history, the provider's logs): the client id names
    the portal; PORTAL_OIDC_LOGOUT_ID_TOKEN_HINT adds it for a provider that needs it."""
    client = Client()
    assert flow(client, oidc).status_code == 302
    id_token = oidc.issued[-1]
    response = client.post("/oidc/logout/")
    assert not signed_in(client)
    target = urlparse(response["Location"])
    query = {k: v[0] for k, v in parse_qs(target.query).items()}
    assert f"{target.scheme}://{target.netloc}{target.path}" == oidc.issuer + "/logout"
    assert "id_token_hint" not in query and id_token not in response["Location"]
    assert query["client_id"] == CLIENT_ID
    assert query["post_logout_redirect_uri"] == "http://testserver/accounts/login/"
    settings.PORTAL_OIDC_LOGOUT_ID_TOKEN_HINT = True
    assert flow(client, oidc).status_code == 302
    response = client.post("/oidc/logout/")
    assert parse_qs(urlparse(response["Location"]).query)["id_token_hint"] == [oidc.issued[-1]]


def test_with_oidc_off_the_views_are_absent_and_passwords_work(settings):
    settings.PORTAL_OIDC_ISSUER = ""
    factories.user("owner", "owner-pass-123")
    client = Client()
    assert client.get("/oidc/login/").status_code == 404
    page = client.get("/accounts/login/").content.decode()
    assert "Sign in with" not in page and 'name="password"' in page
    ok = client.post("/accounts/login/", {"username": "owner", "password": "owner-pass-123"})
    assert ok.status_code == 302 and signed_in(client)
    assert client.post("/oidc/logout/").status_code == 302 and not signed_in(client)


def test_a_local_user_of_the_same_name_is_never_linked_by_name_only_by_an_admin(oidc):
    existing = factories.user("ada", "ada-pass-123", superuser=True)
    client = Client()
    assert_refused(flow(client, oidc), client, "an administrator links your identity")
    assert not Identity.objects.exists()
    existing.refresh_from_db()
    assert existing.is_superuser  # untouched by the refused sign-in
    # The admin links them (an Identity row in the admin): then the sign-in is theirs.
    factories.identity(existing, oidc.issuer, "subject-123", confirmed_ago=None)
    assert flow(client, oidc).status_code == 302 and signed_in(client)
    assert client.session["_auth_user_id"] == str(existing.pk)
    oidc.claims.update(sub="another-subject")  # someone else claiming the name later
    other = Client()
    assert_refused(flow(other, oidc), other, "an administrator links")
    factories.user("rescue", "rescue-pass-123", superuser=True)
    oidc.claims.update(sub="third-subject", preferred_username="rescue")
    assert_refused(flow(other, oidc), other, "an administrator links")


def test_a_person_deactivated_in_the_portal_cannot_sign_in(oidc):
    assert flow(Client(), oidc).status_code == 302
    get_user_model().objects.filter(username="ada").update(is_active=False)
    client = Client()
    assert_refused(flow(client, oidc), client, "deactivated")


def test_a_cluster_user_already_someone_elses_is_never_given_to_a_second_person(oidc):
    alpha = factories.cluster("alpha", user_map="{preferred_username}")
    factories.account(alpha, factories.user("older"), "ada")
    assert flow(Client(), oidc).status_code == 302
    assert not ClusterAccount.objects.filter(user__username="ada").exists()


def test_the_person_may_prove_the_local_password_once_to_link(oidc):
    existing = factories.user("ada", "ada-pass-123", superuser=True)
    client = Client()
    refused = flow(client, oidc)
    assert refused.status_code == 403 and "data-link-identity" in refused.content.decode()
    # A wrong password links nothing, counts as a failed sign-in and ends the offer.
    wrong = client.post("/oidc/link/", {"password": "not-it"})
    assert wrong.status_code == 403 and "nothing was linked" in wrong.content.decode()
    assert not Identity.objects.exists() and not signed_in(client)
    again = client.post("/oidc/link/", {"password": "ada-pass-123"})
    assert again.status_code == 403 and "sign in again" in again.content.decode()
    # The right one, after a new sign-in at the provider: linked, signed in as that user,
    # and the flags are the provider's (no superuser group: no superuser).
    assert flow(client, oidc).status_code == 403
    linked = client.post("/oidc/link/", {"password": "ada-pass-123"})
    assert linked.status_code == 302 and signed_in(client)
    assert client.session["_auth_user_id"] == str(existing.pk)
    assert Identity.objects.get().user == existing
    existing.refresh_from_db()
    assert not existing.is_superuser
    # Once: the next person claiming that name gets no offer.
    oidc.claims.update(sub="another-subject")
    other = Client()
    response = flow(other, oidc)
    assert response.status_code == 403 and "data-link-identity" not in response.content.decode()


def test_no_link_by_password_for_emergency_admins_or_password_less_users(oidc):
    factories.user("rescue", "rescue-pass-123", superuser=True)
    oidc.claims.update(preferred_username="rescue")
    client = Client()
    response = flow(client, oidc)
    assert response.status_code == 403 and "data-link-identity" not in response.content.decode()
    assert client.post("/oidc/link/", {"password": "rescue-pass-123"}).status_code == 403
    assert not Identity.objects.exists() and not signed_in(client)
    factories.user("nopass")
    oidc.claims.update(preferred_username="nopass", sub="s-2")
    assert "data-link-identity" not in flow(Client(), oidc).content.decode()


def test_guessing_the_local_password_is_throttled(oidc, settings):
    settings.PORTAL_SIGNIN_FAILURES = 2
    factories.user("ada", "ada-pass-123")
    client = Client()
    for _ in range(2):
        assert flow(client, oidc).status_code == 403
        client.post("/oidc/link/", {"password": "guess"})
    assert flow(client, oidc).status_code == 403
    locked = client.post("/oidc/link/", {"password": "ada-pass-123"})
    assert locked.status_code == 403 and "Too many failed sign-ins" in locked.content.decode()
    assert not Identity.objects.exists()


def test_an_administrator_links_an_identity_in_the_admin(oidc, staff):
    """The admin's add form takes issuer and subject (read-only once made); the person's
    next sign-in is then the linked user's."""
    existing = factories.user("ada", "ada-pass-123")
    admin = Client()
    admin.force_login(staff)
    factories.identity(staff, oidc.issuer, "staff-subject")  # the admin signs in there too
    form = admin.get("/admin/identity/identity/add/").content.decode()
    assert 'name="issuer"' in form and 'name="subject"' in form
    added = admin.post(
        "/admin/identity/identity/add/",
        {"user": existing.pk, "issuer": oidc.issuer, "subject": "subject-123"},
    )
    assert added.status_code == 302, added.content.decode()[:2000]
    row = Identity.objects.get(subject="subject-123")
    assert row.user == existing
    change = admin.get(f"/admin/identity/identity/{row.pk}/change/").content.decode()
    assert 'name="subject"' not in change  # read-only once made
    client = Client()
    assert flow(client, oidc).status_code == 302
    assert client.session["_auth_user_id"] == str(existing.pk)
