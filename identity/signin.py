"""One OIDC sign-in applied to the portal: the verified id token's claims in, the portal
user out (made at the first sign-in, kept current after), or ``mapping.Refused``.

At every sign-in: name and e-mail follow the claims; staff and superuser follow
PORTAL_OIDC_STAFF_GROUPS / PORTAL_OIDC_SUPERUSER_GROUPS (an unset list: nobody); the Django
groups that PORTAL_OIDC_DJANGO_GROUPS names follow the provider groups of the same name; the
identity's confirmation (confirmation.py) starts again, with its groups and the refresh
token if the provider gave one. A name is not an identity: a first sign-in never attaches
to an existing portal user of the same name (an administrator links them). Each cluster the
person's groups allow gets a cluster account named by its user_map, and each cluster they
no longer allow has the account disabled (kept, so its jobs keep their history). A person
outside PORTAL_OIDC_ALLOWED_GROUPS gets no account, and one who had an account loses every
API token and cluster account at once.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster, ClusterAccount
from common import crypto
from identity import audit, confirmation, mapping
from identity.mapping import Refused
from identity.models import Identity
from identity.tokens import ApiToken

log = logging.getLogger(__name__)

NOT_ALLOWED = (
    "Your identity provider signed you in, but you are not in a group that may use this "
    "portal. Ask the portal's administrators if you need access."
)


NAME_TAKEN = (
    "The portal user name {name!r} belongs to an existing portal account. A sign-in is "
    "never attached to an account by its name: an administrator links your identity to it "
    "(or renames it); ask the portal's administrators."
)


class NameTaken(Refused):
    """The first sign-in's name is an existing portal user's."""

    def __init__(self, username: str) -> None:
        super().__init__(NAME_TAKEN.format(name=username))
        self.username = username


def may_link_by_password(username: str) -> bool:
    """The portal user ``username`` may be linked by proving its local password: active,
    with a usable password, no identity yet, not an emergency admin (those never link)."""
    user = get_user_model().objects.filter(username=username).first()
    return (
        user is not None
        and user.is_active
        and user.has_usable_password()
        and username not in settings.PORTAL_LOCAL_LOGIN_USERS
        and not user.identities.exists()
    )


def link_by_password(issuer: str, subject: str, username: str, password: str) -> bool:
    """The person signed in at the provider as (issuer, subject) proved the local password of
    ``username`` once: that identity is now theirs. False (nothing linked) otherwise."""
    if not may_link_by_password(username):
        return False
    user = get_user_model().objects.get(username=username)
    if not user.check_password(password):
        return False
    with transaction.atomic():
        Identity.objects.create(user=user, issuer=issuer, subject=subject)
    log.info("%s linked to %s at %s by its local password", user, subject, issuer)
    return True


def sign_in(claims: dict, refresh_token: str | None = None):
    """The portal user for verified id token ``claims``; Refused says why there is none."""
    mapping.check_authentication(
        claims, settings.PORTAL_OIDC_REQUIRE_ACR, settings.PORTAL_OIDC_REQUIRE_AMR
    )
    mapping.check_audience(claims, settings.PORTAL_OIDC_CLIENT_ID)
    person = mapping.person(
        claims, settings.PORTAL_OIDC_USERNAME_CLAIM, settings.PORTAL_OIDC_GROUPS_CLAIM
    )
    issuer, subject = str(claims["iss"]), str(claims["sub"])
    if not mapping.in_any(person.groups, settings.PORTAL_OIDC_ALLOWED_GROUPS):
        known = Identity.objects.filter(issuer=issuer, subject=subject).first()
        if known is not None:
            withdraw(known.user)
        raise Refused(NOT_ALLOWED)
    with transaction.atomic():
        user, identity = _user(issuer, subject, person)
        _confirm(identity, person, refresh_token)
        _flags(user, person)
        _cluster_accounts(user, person, claims)
    return user


def reconfirm(identity: Identity, claims: dict) -> bool:
    """A refresh token's answer (the provider's userinfo ``claims`` for ``identity``),
    applied as a sign-in would: still allowed, the confirmation starts again and the flags
    and managed groups follow; out of the allowed groups, withdrawn. True if confirmed."""
    person_groups = mapping.groups(claims.get(settings.PORTAL_OIDC_GROUPS_CLAIM))
    if str(claims.get("sub")) != identity.subject:
        log.warning("refresh for %s answered for another subject; not confirmed", identity)
        return False
    if not mapping.in_any(person_groups, settings.PORTAL_OIDC_ALLOWED_GROUPS):
        log.info("%s is no longer in the allowed groups: withdrawn", identity.user)
        withdraw(identity.user)
        return False
    person = mapping.Person(
        identity.user.get_username(), "", "", "", groups=frozenset(person_groups)
    )
    with transaction.atomic():
        # Only if nothing moved since the identity was read: a back-channel logout or a
        # withdrawal meanwhile (confirmation cleared) must not be undone by this answer.
        confirmed = Identity.objects.filter(
            pk=identity.pk,
            confirmed_at=identity.confirmed_at,
            refresh_token_encrypted=identity.refresh_token_encrypted,
        ).update(confirmed_at=timezone.now(), groups=sorted(person_groups))
        if not confirmed:
            return False
        _flags(identity.user, person)
    return True


def withdraw(user, reason: str = "withdrawn at a refused sign-in") -> None:
    """A person who may no longer use the portal: every token and cluster account, their
    browser sessions and their confirmation (no refresh token brings it back), at once.
    A later sign-in the provider allows gives back what the sign-in gives."""
    with transaction.atomic():
        for token in ApiToken.objects.revoke_all(user):
            audit.token_changed(audit.Action.TOKEN_REVOKE, token, message=reason)
        ClusterAccount.objects.filter(user=user, disabled_at__isnull=True).update(
            disabled_at=timezone.now(), disabled_by=ClusterAccount.DisabledBy.SIGN_IN
        )
        Identity.objects.filter(user=user).update(refresh_token_encrypted="")
        confirmation.unconfirm(user)
        confirmation.end_sessions(user)


def _confirm(identity: Identity, person: mapping.Person, refresh_token: str | None) -> None:
    confirmation.confirm(identity.pk, sorted(person.groups))
    if not settings.PORTAL_OIDC_REFRESH_CONFIRMS:
        refresh_token = None  # not kept when it would not be used
    Identity.objects.filter(pk=identity.pk).update(
        refresh_token_encrypted=crypto.encrypt(refresh_token) if refresh_token else ""
    )


def _user(issuer: str, subject: str, person: mapping.Person):
    users = get_user_model()
    # Two first sign-ins of one person at once: the unique (issuer, subject) lets one win.
    identity = (
        Identity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=issuer, subject=subject)
        .first()
    )
    if identity is None:
        # The name is the provider's claim, not a proof: an existing portal user of that
        # name (a local admin, someone renamed since) is never taken over by it.
        if users.objects.filter(username=person.username).exists():
            raise NameTaken(person.username)
        user = users.objects.create_user(person.username)  # no usable password
        identity = Identity.objects.create(user=user, issuer=issuer, subject=subject)
    user = identity.user
    if not user.is_active:
        raise Refused("Your portal account is deactivated; ask the portal's administrators.")
    if user.username != person.username:
        if users.objects.filter(username=person.username).exists():
            log.warning("%s renamed to %s, which is taken; name kept", user, person.username)
        else:
            user.username = person.username
    user.first_name, user.last_name, user.email = person.first_name, person.last_name, person.email
    user.save()
    now = timezone.now()
    Identity.objects.filter(pk=identity.pk).update(
        last_sign_in=now, provider_username=person.username, account_checked_at=now
    )
    return user, identity


def _flags(user, person: mapping.Person) -> None:
    """Staff and superuser from the provider's groups alone (an unset list: nobody), and
    the managed Django groups (PORTAL_OIDC_DJANGO_GROUPS) from the groups of those names."""
    user.is_superuser, user.is_staff = mapping.flags(
        person.groups, settings.PORTAL_OIDC_STAFF_GROUPS, settings.PORTAL_OIDC_SUPERUSER_GROUPS
    )
    user.save(update_fields=["is_superuser", "is_staff"])
    # Permissions come from the portal's Django groups. Those PORTAL_OIDC_DJANGO_GROUPS
    # names (an admin makes "portal-staff" and gives it "view" on the catalog) follow the
    # provider groups of the same name; any other group an admin gave the user stays.
    patterns = settings.PORTAL_OIDC_DJANGO_GROUPS
    managed = [g for g in Group.objects.all() if mapping.managed_group(g.name, patterns)]
    user.groups.remove(*[g for g in managed if g.name not in person.groups])
    user.groups.add(*[g for g in managed if g.name in person.groups])


def _cluster_accounts(user, person: mapping.Person, claims: dict) -> None:
    """The person's account on each per-user cluster, as its user_map names it: made at the
    first sign-in (``map_to(..., USER_MAP)``), disabled while their groups leave the
    cluster out and enabled again when they come back. Never more than that: an account
    an administrator disabled stays disabled, and an account whose map now gives another
    name keeps its cluster user until an administrator moves it (both recorded)."""
    clusters = Cluster.objects.filter(enabled=True, login_mode=Cluster.LoginMode.PER_USER)
    accounts = {a.cluster_id: a for a in ClusterAccount.objects.filter(user=user)}
    by = ClusterAccount.MappedBy.USER_MAP
    for cluster in clusters:
        account = accounts.get(cluster.pk)
        if not cluster.allows(person.groups):
            if account is not None and account.disabled_at is None:
                account.disabled_at = timezone.now()
                account.disabled_by = ClusterAccount.DisabledBy.SIGN_IN
                account.save(update_fields=["disabled_at", "disabled_by"])
                _record(user, account, "disabled: the person's groups no longer allow it")
            continue
        name = mapping.cluster_username(cluster.user_map, person.username, claims)
        if name is not None and _taken(cluster, name, user):
            log.warning("%s: cluster user %s belongs to another portal user", cluster, name)
            refused = ClusterAccount(cluster=cluster, user=user, username=name)  # (not saved)
            _record(
                user,
                refused,
                "the cluster user belongs to another portal user",
                what=audit.Action.ACCOUNT_CREATE,
                outcome=audit.Outcome.REFUSED,
            )
            name = None
        if account is None:
            if name is None:
                continue
            account = ClusterAccount(cluster=cluster, user=user)
            account.map_to(name, by)
            # Clusters that trust the portal's SSH certificates need no key pair of their own.
            if not cluster.uses_certificates:
                account.generate_key_pair()
            account.save()
            _record(
                user,
                account,
                "from the cluster's user map at sign-in",
                what=audit.Action.ACCOUNT_CREATE,
            )
            continue
        _update(user, account, name)


def _update(user, account: ClusterAccount, name: str | None) -> None:
    """An existing account at sign-in: see ``_cluster_accounts``."""
    fields = []
    if account.disabled_at is not None and account.disabled_by == ClusterAccount.DisabledBy.SIGN_IN:
        account.disabled_at, account.disabled_by = None, ClusterAccount.DisabledBy.NONE
        fields += ["disabled_at", "disabled_by"]
        _record(user, account, "enabled again: the person's groups allow it")
    if name is not None and name != account.username:
        log.warning(
            "%s: the user map now gives %s; kept until an administrator moves it", account, name
        )
        _record(
            user,
            account,
            "the user map now gives another cluster user; an administrator must move it",
            outcome=audit.Outcome.REFUSED,
            moved_to=name,
        )
    elif (
        name is not None
        and account.mapped_by != ClusterAccount.MappedBy.USER_MAP
        and (account.unproven_reason())
    ):
        # A name typed (or written around the portal) that the map now vouches for.
        account.map_to(name, ClusterAccount.MappedBy.USER_MAP)
        fields += ["username", "mapped_by", "mapping_seal"]
        _record(user, account, "confirmed by the cluster's user map at sign-in")
    if fields:
        account.save(update_fields=fields)


def _record(
    user,
    account: ClusterAccount,
    message: str,
    *,
    what: str = audit.Action.ACCOUNT_MAP,
    outcome: str = audit.Outcome.OK,
    moved_to: str = "",
) -> None:
    """The audit row of what a sign-in did (or refused) to ``account``."""
    target = f"{account.username}@{account.cluster.name}" + (f" -> {moved_to}" if moved_to else "")
    audit.record(what, outcome, user=user, account=account, target=target, message=message)


def _taken(cluster: Cluster, name: str, user) -> bool:
    """Another portal user's account on ``cluster`` is already ``name``: never two people
    as one cluster user (their jobs could reach each other's)."""
    return ClusterAccount.objects.filter(cluster=cluster, username=name).exclude(user=user).exists()
