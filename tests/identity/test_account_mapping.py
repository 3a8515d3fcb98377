"""What a sign-in does to cluster accounts (#39): it makes one from the cluster's user map
(vouched for: certificates may be signed), confirms a typed one the map agrees with, and
never more: no move to another cluster user, no re-enabling an administrator's disabling,
nothing for a cluster user another person holds. Each is in the audit log."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from clusters.models import ClusterAccount
from identity.audit.models import AuditEvent
from identity.models import Identity
from tests import factories, oidcprovider

pytestmark = pytest.mark.django_db

USER_MAP = ClusterAccount.MappedBy.USER_MAP


@pytest.fixture
def oidc(oidc_test_provider, settings):
    with oidcprovider.portal_uses(
        oidc_test_provider, settings, PORTAL_OIDC_ALLOWED_GROUPS=["hpc-users"]
    ) as idp:
        yield idp


def ada():
    return get_user_model().objects.get(username="ada")


def actions(outcome: str = "ok") -> list[str]:
    return list(
        AuditEvent.objects.filter(outcome=outcome).order_by("pk").values_list("action", flat=True)
    )


def test_a_first_sign_in_maps_the_account_and_records_it(oidc):
    alpha = factories.cluster("alpha", user_map="{preferred_username}")
    oidcprovider.sign_in(oidc)
    account = ClusterAccount.objects.get(user=ada(), cluster=alpha)
    assert account.mapped_by == USER_MAP and account.unproven_reason() == ""
    row = AuditEvent.objects.get(action=AuditEvent.Action.ACCOUNT_CREATE)
    assert (row.username, row.cluster_username, row.outcome) == ("ada", "ada", "ok")


def test_a_changed_map_never_moves_an_account_without_an_administrator(oidc):
    alpha = factories.cluster("alpha", user_map="{preferred_username}")
    oidcprovider.sign_in(oidc)
    alpha.user_map = "(.*) => \\1-hpc"
    alpha.save()
    oidcprovider.sign_in(oidc)
    account = ClusterAccount.objects.get(user=ada(), cluster=alpha)
    assert account.username == "ada" and account.unproven_reason() == ""
    refused = AuditEvent.objects.get(action=AuditEvent.Action.ACCOUNT_MAP, outcome="refused")
    assert "ada-hpc" in refused.target


def test_a_typed_account_the_map_agrees_with_is_confirmed(oidc):
    alpha = factories.cluster("alpha", user_map="{preferred_username}")
    person = get_user_model().objects.create_user("ada")
    factories.account(alpha, person, "ada", ClusterAccount.MappedBy.TYPED)
    Identity.objects.create(user=person, issuer=oidc.issuer, subject="subject-123")
    oidcprovider.sign_in(oidc)
    account = ClusterAccount.objects.get(user=person, cluster=alpha)
    assert account.mapped_by == USER_MAP and account.unproven_reason() == ""
    assert AuditEvent.Action.ACCOUNT_MAP in actions()


def test_an_account_an_administrator_disabled_stays_disabled(oidc):
    alpha = factories.cluster("alpha", user_map="{preferred_username}")
    oidcprovider.sign_in(oidc)
    ClusterAccount.objects.filter(user=ada()).update(
        disabled_at="2026-01-01T00:00:00Z", disabled_by=ClusterAccount.DisabledBy.ADMIN
    )
    oidcprovider.sign_in(oidc)
    assert ClusterAccount.for_user(alpha, ada()) is None


def test_an_account_a_sign_in_disabled_is_enabled_by_the_next_allowed_one(oidc):
    alpha = factories.cluster("alpha", user_map="{preferred_username}", allowed_groups="gpu")
    oidc.claims["groups"] = ["hpc-users", "gpu"]
    oidcprovider.sign_in(oidc)
    oidc.claims["groups"] = ["hpc-users"]
    oidcprovider.sign_in(oidc)
    account = ClusterAccount.objects.get(user=ada())
    assert account.disabled_by == ClusterAccount.DisabledBy.SIGN_IN
    oidc.claims["groups"] = ["hpc-users", "gpu"]
    oidcprovider.sign_in(oidc)
    assert ClusterAccount.for_user(alpha, ada()) == account


def test_a_cluster_user_another_person_holds_is_refused_and_recorded(oidc):
    alpha = factories.cluster("alpha", user_map="{preferred_username}")
    factories.account(alpha, factories.user("older"), "ada")
    oidcprovider.sign_in(oidc)
    assert not ClusterAccount.objects.filter(user=ada()).exists()
    row = AuditEvent.objects.get(action=AuditEvent.Action.ACCOUNT_CREATE)
    assert row.outcome == "refused" and "another portal user" in row.message
