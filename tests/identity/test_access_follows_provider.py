"""Access follows the provider, on the real path: the portal's whole stack (web, worker,
beat) against Debian's glewlwyd (`make idp`), the dev cluster in certificate mode.

glewlwyd's admin REST API moves hpcuser2 out of portal-users, or disables the account, as a
centre's administrators would. Within PORTAL_OIDC_CONFIRM_MAX_AGE (shortened here) the beat
asks the provider again with the refresh token: out of the group, the person is withdrawn at
once; disabled, the refresh fails and the confirmation runs out. Either way their pp_ token,
their browser session and their certificates stop, and putting them back at the provider
does not re-admit them without a sign-in. Provider JWTs without the group, and id tokens,
are refused by the API; a logout at the provider ends the portal session (back-channel)."""

from __future__ import annotations

import base64
import json
import time
from contextlib import suppress

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session

from clusters import ssh
from clusters.models import ClusterAccount
from identity import audit
from identity.models import Identity
from identity.tokens import ApiToken
from tests import idp, polling
from tests.livestack import LiveStack, free_port

pytestmark = [pytest.mark.devcluster, pytest.mark.idp, pytest.mark.django_db(transaction=True)]

AGE = 30  # PORTAL_OIDC_CONFIRM_MAX_AGE for the stack: the beat refreshes after 15 s
PERSON = "hpcuser2"


@pytest.fixture
def oidc_env(idp_provider, settings):
    env = {
        "PORTAL_OIDC_ISSUER": idp_provider.issuer,
        "PORTAL_OIDC_CLIENT_ID": idp_provider.client_id,
        "PORTAL_OIDC_CLIENT_SECRET": idp_provider.client_secret,
        "PORTAL_OIDC_API_AUDIENCE": idp_provider.api_audience,
        "PORTAL_OIDC_ALLOWED_GROUPS": "portal-users",
        "PORTAL_OIDC_STAFF_GROUPS": "portal-staff",
        "PORTAL_OIDC_CONFIRM_MAX_AGE": str(AGE),
    }
    if not idp_provider.api_audience:
        pytest.skip("the provider has no API audience yet: run `make idp` again")
    # This process signs certificates too (the cluster action below), with the same rules.
    settings.PORTAL_OIDC_ISSUER = idp_provider.issuer
    settings.PORTAL_OIDC_CLIENT_ID = idp_provider.client_id
    settings.PORTAL_OIDC_CONFIRM_MAX_AGE = AGE
    return env


@pytest.fixture
def stack_env() -> dict:
    """More environment for the stack (a test parametrizes it)."""
    return {}


@pytest.fixture
def stack(idp_provider, provider_mapped_devcluster, oidc_env, stack_env, tmp_path):
    _, ca = provider_mapped_devcluster
    live = LiveStack(tmp_path, env={**oidc_env, "PORTAL_SSH_CA_KEY_FILES": str(ca), **stack_env})
    with (
        idp.redirect_uris(idp_provider, live.url),
        idp.backchannel_logout_uri(idp_provider, live.url),
    ):
        live.start()
        try:
            yield live
        finally:
            live.stop()


class Person:
    """One person signed in to the stack through the provider: the portal's cookies, the
    provider's, and what the test does with them."""

    def __init__(self, stack: LiveStack, provider: idp.Provider, username: str) -> None:
        self.stack, self.provider, self.username = stack, provider, username
        self.portal = httpx.Client(base_url=stack.url, timeout=30)
        self.at_provider = idp.ProviderClient(provider)
        start = self.portal.get("/oidc/login/")
        assert start.status_code == 302, start.text
        password = provider.users[username].password
        with idp.person_lock(provider, username):
            assert self.at_provider.sign_in(username, password).status_code == 200
            answer = self.at_provider.request("GET", start.headers["location"] + "&g_continue=")
        assert answer.status_code == 302, answer.text
        back = self.portal.get(answer.headers["location"])
        assert back.status_code == 302 and back.headers["location"] == "/", back.text
        self.user = get_user_model().objects.get(username=username)
        _, self.token = ApiToken.issue(self.user, f"live-{time.monotonic()}")

    def page(self) -> int:
        return self.portal.get("/").status_code  # 200 signed in, 302 to sign-in otherwise

    def api(self, token: str | None = None) -> int:
        response = httpx.get(
            f"{self.stack.url}/api/v1/jobs/",
            headers={"Authorization": f"Bearer {token or self.token}"},
            timeout=30,
        )
        return response.status_code

    def cluster_user(self) -> str:
        """The person's own cluster action (the Account page's test): a certificate for
        their account, `id -un` over it."""
        account = ClusterAccount.objects.get(user=self.user)
        with audit.action(audit.Action.ACCOUNT_TEST, user=self.user, account=account):
            conn = ssh.connect_account(account)
        try:
            return conn.run(["id", "-un"]).stdout.strip()
        finally:
            conn.close()

    def cluster_refused(self) -> bool:
        try:
            self.cluster_user()
        except ssh.AuthenticationFailed as exc:
            assert "sign in to the portal again" in str(exc)
            return True
        return False

    def portal_session(self) -> dict:
        key = self.portal.cookies.get("sessionid")
        return Session.objects.get(session_key=key).get_decoded()

    def close(self) -> None:
        self.portal.close()
        self.at_provider.close()


def jwt_for(provider: idp.Provider, username: str, redirect: str) -> dict:
    client = idp.ProviderClient(provider)
    try:
        return idp.code_flow_tokens(client, username, redirect, resource=provider.api_audience)
    finally:
        client.close()


def claims_of(token: str) -> dict:
    body = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def refused_everywhere(person: Person) -> bool:
    return person.api() == 401 and person.page() == 302 and person.cluster_refused()


def test_moved_out_of_the_group_at_the_provider_loses_tokens_session_and_certificates(
    stack, idp_provider
):
    redirect = f"{stack.url}{idp.CALLBACK_PATH}"
    person = Person(stack, idp_provider, PERSON)
    try:
        assert person.page() == 200 and person.api() == 200
        assert person.cluster_user() == PERSON
        tokens = jwt_for(idp_provider, PERSON, redirect)
        access = claims_of(tokens["access_token"])
        assert access["aud"] == idp_provider.api_audience and "portal-users" in access["groups"]
        assert person.api(tokens["access_token"]) == 200
        # The id token (audience: the client id, a nonce) is no API token.
        assert person.api(tokens["id_token"]) == 401

        with idp.changed_person(idp_provider, PERSON, groups=["visitors"]):
            moved = jwt_for(idp_provider, PERSON, redirect)
            assert "portal-users" not in claims_of(moved["access_token"]).get("groups", "")
            assert person.api(moved["access_token"]) == 401
            # The beat's refresh sees the groups at half the age: withdrawn then, and in
            # any case refused once the age has passed.
            polling.until(lambda: refused_everywhere(person), AGE + 20, "refused", interval=1)
            identity = Identity.objects.get(user=person.user)
            assert identity.confirmed_at is None and identity.refresh_token_encrypted == ""
        # Back in portal-users at the provider: no refresh re-admits them; a sign-in must.
        time.sleep(AGE / 2)
        assert refused_everywhere(person)
        assert Identity.objects.get(user=person.user).confirmed_at is None
    finally:
        person.close()


def test_glewlwyd_keeps_answering_a_disabled_persons_refresh_token(idp_provider):
    """Why PORTAL_OIDC_REFRESH_CONFIRMS must be off with glewlwyd 2.7 (README): disabling
    a person there stops their sign-ins, not their refresh tokens nor its userinfo."""
    client = idp.ProviderClient(idp_provider)
    try:
        with idp.redirect_uris(idp_provider, f"http://127.0.0.1:{free_port()}") as (redirect, _):
            tokens = idp.code_flow_tokens(client, PERSON, redirect)
        discovery = idp_provider.discovery()
        with idp.changed_person(idp_provider, PERSON, enabled=False):
            refreshed = httpx.post(
                discovery["token_endpoint"],
                data={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]},
                auth=(idp_provider.client_id, idp_provider.client_secret),
                timeout=15,
            )
            assert refreshed.status_code == 200
            userinfo = httpx.get(
                discovery["userinfo_endpoint"],
                headers={"Authorization": f"Bearer {refreshed.json()['access_token']}"},
                timeout=15,
            )
            assert userinfo.status_code == 200 and "portal-users" in userinfo.json()["groups"]
            # A sign-in, though, is refused.
            password = idp_provider.users[PERSON].password
            assert client.sign_in(PERSON, password).status_code == 401
    finally:
        client.close()


@pytest.mark.parametrize("stack_env", [{"PORTAL_OIDC_REFRESH_CONFIRMS": "0"}])
def test_disabled_at_the_provider_loses_everything_after_the_confirmation_age(stack, idp_provider):
    person = Person(stack, idp_provider, PERSON)
    try:
        assert person.page() == 200 and person.api() == 200
        assert person.cluster_user() == PERSON
        signed_in = Identity.objects.get(user=person.user).confirmed_at
        assert signed_in is not None
        with idp.changed_person(idp_provider, PERSON, enabled=False):
            polling.until(lambda: refused_everywhere(person), AGE + 20, "refused", interval=1)
            # Only a sign-in confirms, and the provider refuses it now.
            assert Identity.objects.get(user=person.user).confirmed_at == signed_in
            with pytest.raises(AssertionError):
                Person(stack, idp_provider, PERSON)
    finally:
        person.close()


def test_a_logout_at_the_provider_ends_the_portal_session(stack, idp_provider):
    """What the provider's end-session page does (DELETE the OIDC session): glewlwyd POSTs a
    logout token to /oidc/backchannel-logout/, and the portal session is over."""
    person = Person(stack, idp_provider, "hpcuser")
    try:
        assert person.page() == 200 and person.api() == 200
        sid = claims_of(person.portal_session()["oidc_id_token"])["sid"]
        ended = person.at_provider.request("DELETE", f"{idp_provider.api}/oidc/session/{sid}")
        assert ended.status_code == 200
        polling.until(lambda: person.page() == 302, 20, "the portal session ended", interval=1)
        assert person.api() == 401  # the confirmation is cleared too
        assert Identity.objects.get(user=person.user).confirmed_at is None
    finally:
        with suppress(httpx.HTTPError):
            person.at_provider.request("DELETE", f"{idp_provider.api}/auth/")
        person.close()
