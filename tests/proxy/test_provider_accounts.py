"""A person disabled at the identity provider loses their sessions within seconds (#59).

glewlwyd 2.7 sends no logout and keeps answering refresh tokens when an administrator
disables someone, so the portal asks its account API (identity/accounts.py, every
PORTAL_OIDC_ACCOUNT_SECONDS = 5 in the beat). Debian's glewlwyd (`make idp`) and HAProxy,
the live portal and stand-in notebooks: hpcuser2's own notebook, and the owner's notebook
shared with hpcuser2."""

import time

import pytest

from identity import accounts
from identity.models import Identity
from identity.tokens import ApiToken
from jobs.models import Job
from proxy.models import SessionLink
from tests import factories, idp
from tests.proxy.test_sharing import share
from tests.proxystack import TOKEN, sign_in

pytestmark = [pytest.mark.idp, pytest.mark.django_db(transaction=True)]

PERSON = "hpcuser2"  # a person of deploy/idp/configure.py


@pytest.fixture
def at_provider(idp_provider, settings):
    if not idp_provider.account_url:
        pytest.skip("the provider has no account key yet: run `make idp` again")
    idp.portal_settings(
        idp_provider,
        settings,
        PORTAL_OIDC_ACCOUNT_URL=idp_provider.account_url,
        PORTAL_OIDC_ACCOUNT_AUTHORIZATION=idp_provider.account_authorization,
    )
    # The test asks the provider about hpcuser2 before, during and after disabling them:
    # no other test process changes them meanwhile.
    with idp.person_lock(idp_provider, PERSON):
        yield idp_provider


def test_disabled_at_the_provider_refused_at_haproxy_within_seconds(
    at_provider, ready, data_path, owner, cluster, echo
):
    issuer = at_provider.issuer
    person = factories.user(PERSON, "unused-password-1")
    project = factories.project(cluster, "vision", [owner, person], role="viewer")
    ready.job.project = project
    ready.job.save(update_fields=["project"])
    factories.identity(owner, issuer, "owner-subject", provider_username="demo")
    factories.identity(person, issuer, "hpcuser2-subject", provider_username=PERSON)
    ApiToken.issue(person, "live")
    share(owner, ready, people=PERSON, acts_as_owner="on")
    theirs = factories.job(
        person,
        cluster,
        "",
        partition=ready.job.partition,
        image=ready.job.image,
        kind=Job.Kind.NOTEBOOK,
        memory_gb=4,
        time_limit_minutes=60,
        state="running",
        node="127.0.0.1",
    )
    own = SessionLink.for_job(theirs)
    assert own.mark_ready("127.0.0.1", echo, TOKEN)
    cookies = {s.public_id: sign_in(data_path, s, person) for s in (ready, own)}
    owners = sign_in(data_path, ready, owner)
    for public_id, cookie in cookies.items():
        assert data_path.get(public_id, cookie=cookie).status_code == 200

    # Enabled at the provider: the check changes nothing (and asks hpcuser2 first).
    assert accounts.run() == {"enabled": 2, "withdrawn": 0, "unknown": 0}
    with idp.changed_person(at_provider, PERSON, enabled=False):
        # Disabled at the provider, nothing else: still let through (before: until the
        # confirmation's age, 10 h by default).
        assert data_path.get(own.public_id, cookie=cookies[own.public_id]).status_code == 200
        started = time.monotonic()
        counts = accounts.run()  # what the beat runs every 5 s
        refused = {p: data_path.get(p, cookie=c).status_code for p, c in cookies.items()}
        took = time.monotonic() - started
    assert counts == {"enabled": 1, "withdrawn": 1, "unknown": 0}
    assert refused == {ready.public_id: 302, own.public_id: 302}, refused
    assert took < 5, took  # plus at most one beat interval (5 s): within 10 s
    print(f"\ndisabled at glewlwyd: refused at HAProxy {took * 1000:.0f} ms after the check")
    assert data_path.get(ready.public_id, cookie=owners).status_code == 200
    assert data_path.api.openers() == {ready.public_id: {owner.pk}}
    assert ApiToken.objects.get(user=person).revoked_at is not None
    assert Identity.objects.get(user=person).confirmed_at is None
    # Enabled again at the provider: only a sign-in lets them back in.
    assert accounts.run()["withdrawn"] == 0
    assert data_path.get(ready.public_id, cookie=cookies[ready.public_id]).status_code == 302
