"""Signing in through the centre's identity provider, in Chromium against the whole stack:
the real provider (`make idp`, Debian's glewlwyd, its own login page), the portal's OIDC
sign-in, and the dev cluster in certificate mode (no stored key for anyone)."""

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission

from clusters.models import ClusterAccount
from identity.audit.models import AuditEvent
from jobs.models import Job
from tests import factories, idp
from tests.e2e.pages import launch
from tests.livestack import LiveStack

pytestmark = [pytest.mark.devcluster, pytest.mark.idp, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def certificate_cluster(provider_mapped_devcluster):
    """The dev cluster as people signed in through the provider use it, with an image."""
    factories.image("python-host", "Python (host)", description="The node's own Python.")
    return provider_mapped_devcluster


@pytest.fixture
def oidc_stack(idp_provider, certificate_cluster, tmp_path):
    _, ca = certificate_cluster
    live = LiveStack(
        tmp_path,
        env={
            "PORTAL_OIDC_ISSUER": idp_provider.issuer,
            "PORTAL_OIDC_CLIENT_ID": idp_provider.client_id,
            "PORTAL_OIDC_CLIENT_SECRET": idp_provider.client_secret,
            "PORTAL_OIDC_PROVIDER_NAME": "the dev provider",
            "PORTAL_OIDC_ALLOWED_GROUPS": "portal-users",
            "PORTAL_OIDC_STAFF_GROUPS": "portal-staff",
            # The Django group of that name follows the provider group (an allowlist).
            "PORTAL_OIDC_DJANGO_GROUPS": "portal-staff",
            # glewlwyd 2.7 ends its session only when given the id token (README).
            "PORTAL_OIDC_LOGOUT_ID_TOKEN_HINT": "1",
            "PORTAL_SSH_CA_KEY_FILES": str(ca),
        },
    )
    with idp.redirect_uris(idp_provider, live.url):
        live.start()
        try:
            yield live
        finally:
            live.stop()


def provider_sign_in(page, provider, username: str) -> None:
    """On the provider's own login page: user name, password, then "Continue"."""
    page.wait_for_url(f"{provider.origin}/**")
    page.fill("#username", username)
    page.fill("#password", provider.users[username].password)
    page.click("#loginbut")
    page.get_by_role("button", name="Continue").click()


def start_sign_in(page, stack) -> None:
    page.goto(f"{stack.url}/")
    page.get_by_role("link", name="Sign in with the dev provider").click()


def test_a_person_signs_in_at_the_provider_runs_a_job_with_certificates_and_signs_out(
    browser, oidc_stack, idp_provider, certificate_cluster, devcluster_info, screenshot
):
    stack, (cluster, _) = oidc_stack, certificate_cluster
    page = browser.new_context().new_page()
    start_sign_in(page, stack)
    screenshot(page, "90-provider-login")
    provider_sign_in(page, idp_provider, "hpcuser")
    page.wait_for_url(f"{stack.url}/")
    page.get_by_role("button", name="Sign out hpcuser").wait_for()
    screenshot(page, "91-dashboard-after-provider-sign-in")

    # The first sign-in made the portal user and mapped the cluster user, with no key.
    person = get_user_model().objects.get(username="hpcuser")
    assert (person.email, person.is_staff) == (idp_provider.users["hpcuser"].email, False)
    account = ClusterAccount.objects.get(cluster=cluster, user=person)
    assert (account.username, account.private_key_encrypted) == ("hpcuser", "")

    # A job from the form runs on the cluster over a certificate naming this person.
    job_id = launch(page, stack, "Python (host)", "Batch command", "echo signed-in-by-oidc")
    page.locator("[data-badge]", has_text="Completed").first.wait_for(timeout=120_000)
    job = Job.objects.get(pk=job_id)
    assert job.state == "completed" and job.cluster_account == account
    submit = AuditEvent.objects.get(action="submit", target__startswith=f"job {job_id}")
    assert submit.username == "hpcuser" and submit.key_id.startswith("portal:hpcuser:hpcuser@")
    sshd_log = Path(devcluster_info["sshd_log"]).read_text(errors="replace")
    assert f"ID {submit.key_id} (serial" in sshd_log

    # Signing out ends the provider's session too: signing in again asks for the password.
    page.get_by_role("button", name="Sign out hpcuser").click()
    page.get_by_role("button", name="Logout").click()  # the provider's end-session page
    page.wait_for_url(f"{stack.url}/**")
    assert page.get_by_role("button", name="Sign out hpcuser").count() == 0
    start_sign_in(page, stack)
    page.wait_for_url(f"{idp_provider.origin}/**")
    page.locator("#password").wait_for()
    screenshot(page, "92-provider-asks-again")


def test_the_refused_group_sees_a_refusal_and_the_staff_group_reaches_the_admin(
    browser, oidc_stack, idp_provider, screenshot
):
    stack = oidc_stack
    # Permissions come from the Django group named like the provider group.
    staff_group = Group.objects.create(name="portal-staff")
    staff_group.permissions.add(Permission.objects.get(codename="view_containerimage"))
    page = browser.new_context().new_page()
    start_sign_in(page, stack)
    provider_sign_in(page, idp_provider, "outsider")
    page.locator("[data-signin-refused]").wait_for()
    assert (
        "not in a group that may use this portal"
        in page.locator("[data-signin-refused]").inner_text()
    )
    screenshot(page, "93-refused")
    assert not get_user_model().objects.filter(username="outsider").exists()
    page.goto(f"{stack.url}/")  # not signed in: the portal sends them to its sign-in page
    page.wait_for_url(f"{stack.url}/accounts/login/**")

    page = browser.new_context().new_page()
    start_sign_in(page, stack)
    provider_sign_in(page, idp_provider, "demo")
    page.wait_for_url(f"{stack.url}/")
    page.get_by_role("link", name="Admin").click()
    page.wait_for_url(f"{stack.url}/admin/")
    page.get_by_role("link", name="Container images").wait_for()  # its group's permission
    screenshot(page, "94-staff-admin")
    demo = get_user_model().objects.get(username="demo")
    assert demo.is_staff and list(demo.groups.all()) == [staff_group]
