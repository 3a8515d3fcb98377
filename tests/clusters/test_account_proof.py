"""A cluster user is proven, never typed (#39): certificates are signed only for accounts
whose cluster user came from the cluster's user map or an administrator, as the row's
seal records; the Account page offers a name to type only where installing a key proves
it; one portal user per cluster user, in the database."""

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from clusters import certs, ssh
from clusters.models import Cluster, ClusterAccount
from identity.audit.models import AuditEvent
from identity.models import Identity
from tests import factories

pytestmark = pytest.mark.django_db

TYPED = ClusterAccount.MappedBy.TYPED
USER_MAP = ClusterAccount.MappedBy.USER_MAP
ADMIN = ClusterAccount.MappedBy.ADMIN


@pytest.fixture
def cert_cluster(signing_ca):
    return factories.cluster("certs", ssh_auth=Cluster.SshAuth.CERTIFICATE)


def principals(account) -> list[bytes]:
    cert = certs.certificate_of(ssh.account_key(account))
    assert cert is not None
    return cert.valid_principals


@pytest.mark.parametrize("by", [USER_MAP, ADMIN])
def test_the_signer_signs_for_a_mapped_or_admin_made_account(cert_cluster, by):
    account = factories.account(cert_cluster, factories.user("bob"), "hpcuser", by)
    assert principals(account) == [b"hpcuser"]


def test_the_signer_refuses_a_typed_cluster_user(cert_cluster, monkeypatch):
    issued = []
    monkeypatch.setattr(certs, "issue", lambda *a, **k: issued.append(a))
    account = factories.account(cert_cluster, factories.user("bob"), "hpcuser", TYPED)
    with pytest.raises(ssh.AuthenticationFailed, match="typed, not proven"):
        ssh.account_key(account)
    assert issued == []


@pytest.mark.parametrize(
    "written",
    [
        {"username": "hpcuser"},  # another cluster user, seal left as it was
        {"mapped_by": ADMIN},  # a typed row "promoted" around the portal
        {"mapping_seal": "0" * 64},
    ],
)
def test_the_signer_refuses_a_row_changed_straight_in_the_database(cert_cluster, written):
    bob = factories.user("bob")
    account = factories.account(
        cert_cluster, bob, "bob", TYPED if "mapped_by" in written else ADMIN
    )
    ClusterAccount.objects.filter(pk=account.pk).update(**written)
    account.refresh_from_db()
    with pytest.raises(ssh.AuthenticationFailed):
        ssh.account_key(account)


def test_a_seal_from_an_older_encryption_key_still_signs(cert_cluster, settings):
    account = factories.account(cert_cluster, factories.user("bob"), "bob")
    from common import crypto

    settings.PORTAL_ENCRYPTION_KEYS = [crypto.generate_key(), *settings.PORTAL_ENCRYPTION_KEYS]
    assert principals(account) == [b"bob"]
    settings.PORTAL_ENCRYPTION_KEYS = [crypto.generate_key()]  # the old key gone: refused
    with pytest.raises(ssh.AuthenticationFailed, match="changed outside"):
        ssh.account_key(account)


def test_one_portal_user_per_cluster_user_in_the_database(cert_cluster):
    factories.account(cert_cluster, factories.user("alice"), "hpcuser")
    with pytest.raises(IntegrityError), transaction.atomic():
        factories.account(cert_cluster, factories.user("mallory"), "hpcuser")
    # The service account may share a name with nobody's rule: it is not a person's.
    factories.account(cert_cluster, None, "hpcuser")


# --- the Account page -----------------------------------------------------------------


def test_the_account_page_offers_nothing_to_type_for_a_certificate_cluster(client, cert_cluster):
    mallory = factories.user("mallory")
    client.force_login(mallory)
    page = client.get("/account/").content.decode()
    assert 'data-certificate-cluster="certs"' in page
    assert "never from a name typed here" in page
    assert 'name="username"' not in page  # no form at all: nothing else is offered
    answer = client.post("/account/", {"cluster": cert_cluster.pk, "username": "hpcuser"})
    assert answer.status_code == 200
    assert "Select a valid choice" in answer.content.decode()
    assert not ClusterAccount.objects.filter(user=mallory).exists()
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.ACCOUNT_CREATE).exists()


def test_a_typed_account_on_a_key_pair_cluster_gets_a_key_and_an_audit_row(client, db):
    cluster = factories.cluster("keys")
    alice = factories.user("alice")
    client.force_login(alice)
    client.post("/account/", {"cluster": cluster.pk, "username": "alice"})
    account = ClusterAccount.objects.get(user=alice)
    assert account.mapped_by == TYPED and account.public_key.startswith("ssh-ed25519 ")
    row = AuditEvent.objects.get(action=AuditEvent.Action.ACCOUNT_CREATE)
    assert (row.username, row.cluster_username, row.outcome) == ("alice", "alice", "ok")


def test_a_key_pair_cluster_user_held_by_another_person_is_refused(client, db):
    cluster = factories.cluster("keys")
    factories.account(cluster, factories.user("alice"), "alice", TYPED)
    mallory = factories.user("mallory")
    client.force_login(mallory)
    answer = client.post("/account/", {"cluster": cluster.pk, "username": "alice"})
    assert "Another portal user already has this cluster user" in answer.content.decode()
    assert not ClusterAccount.objects.filter(user=mallory).exists()


def test_allowed_groups_apply_to_the_account_page(client, settings):
    settings.PORTAL_OIDC_ISSUER = "https://idp.example.org"
    cluster = factories.cluster("keys", allowed_groups="gpu-users")
    person = factories.user("carol")
    factories.identity(person, "https://idp.example.org", "c")  # confirmed just now
    Identity.objects.filter(user=person).update(groups=["x"])
    client.force_login(person)
    answer = client.post("/account/", {"cluster": cluster.pk, "username": "carol"})
    assert "Select a valid choice" in answer.content.decode()
    Identity.objects.filter(user=person).update(groups=["gpu-users"])
    client.post("/account/", {"cluster": cluster.pk, "username": "carol"})
    assert ClusterAccount.objects.filter(user=person, cluster=cluster).exists()


def test_the_page_says_a_typed_certificate_account_is_not_confirmed(client, cert_cluster):
    bob = factories.user("bob")
    factories.account(cert_cluster, bob, "bob", TYPED)
    client.force_login(bob)
    assert "data-account-unproven" in client.get("/account/").content.decode()


# --- the admin ------------------------------------------------------------------------


def test_an_administrator_saving_an_account_vouches_for_it(admin_client, cert_cluster):
    bob = factories.user("bob")
    answer = admin_client.post(
        reverse("admin:jobs_clusteraccount_add"),
        {"cluster": cert_cluster.pk, "user": bob.pk, "username": "hpcuser", "disabled_at": ""},
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    account = ClusterAccount.objects.get(user=bob)
    assert account.mapped_by == ADMIN and principals(account) == [b"hpcuser"]
    row = AuditEvent.objects.get(action=AuditEvent.Action.ACCOUNT_CREATE)
    assert row.username == "admin" and row.cluster_username == "hpcuser"


def test_the_admin_confirms_typed_accounts_and_records_disabling(admin_client, cert_cluster):
    bob = factories.user("bob")
    account = factories.account(cert_cluster, bob, "bob", TYPED)
    admin_client.post(
        reverse("admin:jobs_clusteraccount_changelist"),
        {"action": "confirm_cluster_user", "_selected_action": [account.pk]},
    )
    account.refresh_from_db()
    assert account.mapped_by == ADMIN and principals(account) == [b"bob"]
    assert AuditEvent.objects.filter(action=AuditEvent.Action.ACCOUNT_MAP).count() == 1
    admin_client.post(
        reverse("admin:jobs_clusteraccount_change", args=[account.pk]),
        {
            "cluster": cert_cluster.pk,
            "user": bob.pk,
            "username": "bob",
            "disabled_at_0": "2026-01-01",
            "disabled_at_1": "00:00:00",
        },
    )
    account.refresh_from_db()
    assert account.disabled_at and account.disabled_by == ClusterAccount.DisabledBy.ADMIN


def test_the_admin_refuses_a_person_outside_the_clusters_groups(admin_client, settings, signing_ca):
    settings.PORTAL_OIDC_ISSUER = "https://idp.example.org"
    settings.PORTAL_LOCAL_LOGIN_USERS = ["admin"]  # the emergency admin: no provider
    cluster = factories.cluster("gpu", allowed_groups="gpu-users")
    bob = factories.user("bob")
    answer = admin_client.post(
        reverse("admin:jobs_clusteraccount_add"),
        {"cluster": cluster.pk, "user": bob.pk, "username": "bob", "disabled_at": ""},
    )
    assert answer.status_code == 200
    assert "in none of the groups that may use gpu" in answer.content.decode()
    assert not ClusterAccount.objects.filter(user=bob).exists()
