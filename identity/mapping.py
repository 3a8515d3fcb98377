"""What a person's claims make of them in the portal: pure functions of the claims and
the settings' values, tested without a provider. The cluster user per cluster follows each
Cluster's user_map (common/usermap.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from common import usermap

# Portal user names: Django's default validator (letters, digits, @ . + - _), at most 150.
_PORTAL_USERNAME = re.compile(r"^[\w.@+-]{1,150}\Z")


class Refused(Exception):
    """The person may not sign in; the message is shown to them."""


@dataclass(frozen=True)
class Person:
    username: str
    first_name: str
    last_name: str
    email: str
    groups: frozenset[str]


def person(claims: dict, username_claim: str, groups_claim: str) -> Person:
    """The portal user fields from id token claims; Refused if the user name is unusable."""
    username = claims.get(username_claim)
    if not isinstance(username, str) or not _PORTAL_USERNAME.fullmatch(username):
        raise Refused(f"The identity provider sent no usable user name (claim {username_claim!r}).")
    return Person(
        username=username,
        first_name=_text(claims.get("given_name"), 150),
        last_name=_text(claims.get("family_name"), 150),
        email=_text(claims.get("email"), 254) if claims.get("email_verified", True) else "",
        groups=groups(claims.get(groups_claim)),
    )


def groups(value: object) -> frozenset[str]:
    """A groups claim: a list of names (or one space/comma-separated string)."""
    if isinstance(value, str):
        items: Iterable[object] = re.split(r"[,\s]+", value)
    elif isinstance(value, list):
        items = value
    else:
        return frozenset()
    return frozenset(item.strip() for item in items if isinstance(item, str) and item.strip())


def _text(value: object, limit: int) -> str:
    return value.strip()[:limit] if isinstance(value, str) else ""


def in_any(member_of: frozenset[str], wanted: Sequence[str]) -> bool:
    """Empty ``wanted``: everyone; otherwise one group in common."""
    return not wanted or bool(member_of & set(wanted))


def member_of_any(member_of: frozenset[str], wanted: Sequence[str]) -> bool:
    """One group in common; an empty ``wanted`` means nobody (unlike ``in_any``)."""
    return bool(member_of & set(wanted))


def flags(
    member_of: frozenset[str], staff_groups: Sequence[str], superuser_groups: Sequence[str]
) -> tuple[bool, bool]:
    """(is_superuser, is_staff) for a person in ``member_of``: the provider decides both,
    an unset list means no; a superuser is staff too."""
    superuser = member_of_any(member_of, superuser_groups)
    return superuser, superuser or member_of_any(member_of, staff_groups)


def managed_group(name: str, patterns: Sequence[str]) -> bool:
    """A Django group the provider's groups decide: named in ``patterns`` (exactly, or by
    a trailing-``*`` prefix such as ``portal-*``); none when ``patterns`` is empty."""
    for pattern in patterns:
        if pattern.endswith("*") and len(pattern) > 1:
            if name.startswith(pattern[:-1]):
                return True
        elif name == pattern:
            return True
    return False


def check_authentication(claims: dict, require_acr: Sequence[str], require_amr: Sequence[str]):
    """Refused unless the id token's acr is one of ``require_acr`` and its amr holds one of
    ``require_amr`` (when set): how strongly the provider authenticated the person."""
    if require_acr and claims.get("acr") not in require_acr:
        raise Refused(
            "This portal needs a stronger sign-in (for example with a second factor) "
            "than the one your identity provider reported."
        )
    amr = claims.get("amr")
    if require_amr and not (isinstance(amr, list) and set(amr) & set(require_amr)):
        raise Refused(
            "This portal needs a sign-in with a second factor; your identity provider "
            "did not report one."
        )


def check_audience(claims: dict, client_id: str) -> None:
    """Several audiences: the token must name this portal as its authorised party (azp)."""
    aud = claims.get("aud")
    if isinstance(aud, list) and len(aud) > 1 and claims.get("azp") != client_id:
        raise Refused("The sign-in could not be verified (the token was issued to another party).")


def cluster_username(user_map: str, username: str, claims: dict) -> str | None:
    return usermap.cluster_username(user_map, username, claims)
