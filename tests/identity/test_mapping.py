"""Claims -> portal user, cluster user per cluster (common/usermap.py) and group decisions:
pure functions, no provider."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from common import usermap
from identity import mapping
from identity.mapping import Refused

CLAIMS = {"preferred_username": "ada", "uid": "ada42", "email": "a@x.org", "groups": ["g1", "g2"]}


@pytest.mark.parametrize(
    ("user_map", "username", "expected"),
    [
        ("", "ada", None),
        ("{preferred_username}", "ada", "ada"),
        ("{uid}", "ada", "ada42"),
        ("hpc_{preferred_username}", "ada", "hpc_ada"),
        ("{missing}", "ada", None),
        ("{groups}", "ada", None),  # a list, not a name
        # Ordered regex rules, first match wins; \1 and named groups fill the template.
        ("^(.+)@example\\.org$ => \\1\n^(.+)$ => ext_\\1", "bob@example.org", "bob"),
        ("^(.+)@example\\.org$ => \\1\n^(.+)$ => ext_\\1", "carol", "ext_carol"),
        ("^(?P<who>[a-z]+)\\.(?P<dept>[a-z]+)$ => \\g<dept>_\\g<who>", "ada.phys", "phys_ada"),
        ("^admin$ => nobody\n^(.+)$ => {uid}", "ada", "ada42"),
        ("^zzz$ => z", "ada", None),
    ],
)
def test_cluster_usernames_follow_the_user_map(user_map, username, expected):
    assert mapping.cluster_username(user_map, username, CLAIMS) == expected


@pytest.mark.parametrize(
    "hostile",
    ["ada; rm -rf /", "Ada", "../root", "a" * 40, "ada\nroot", "-oProxyCommand=x", "$(id)"],
)
def test_a_claim_that_is_no_posix_user_name_gives_no_cluster_user(hostile):
    claims = {**CLAIMS, "preferred_username": hostile}
    assert mapping.cluster_username("{preferred_username}", hostile, claims) is None
    assert mapping.cluster_username("^(.*)$ => \\1", hostile, claims) is None


@pytest.mark.parametrize("bad", ["^(x => y\n^a$ => b", "no arrow\nhere", " => x\n"])
def test_a_user_map_that_does_not_parse_is_refused_by_the_validator(bad):
    with pytest.raises(ValidationError):
        usermap.parse(bad)


def test_person_takes_names_email_and_groups():
    person = mapping.person(
        {**CLAIMS, "given_name": "Ada", "family_name": "King"}, "preferred_username", "groups"
    )
    assert (person.username, person.first_name, person.last_name) == ("ada", "Ada", "King")
    assert person.email == "a@x.org" and person.groups == {"g1", "g2"}
    unverified = mapping.person({**CLAIMS, "email_verified": False}, "preferred_username", "groups")
    assert unverified.email == ""


@pytest.mark.parametrize("name", [None, "", "a b", "x" * 151, ["ada"], "ada/../b"])
def test_an_unusable_user_name_claim_is_refused(name):
    with pytest.raises(Refused):
        mapping.person({**CLAIMS, "preferred_username": name}, "preferred_username", "groups")


def test_groups_claims_in_either_shape_and_nothing_else():
    assert mapping.groups(["a", "b", 3, None]) == {"a", "b"}
    assert mapping.groups("a, b c") == {"a", "b", "c"}
    assert mapping.groups({"a": 1}) == frozenset()


def test_allowed_groups_empty_means_everyone():
    assert mapping.in_any(frozenset(), [])
    assert mapping.in_any(frozenset({"g1"}), ["g1", "g9"])
    assert not mapping.in_any(frozenset({"g2"}), ["g1"])


def test_acr_and_amr_requirements():
    mapping.check_authentication({"acr": "mfa"}, ["mfa"], [])
    with pytest.raises(Refused):
        mapping.check_authentication({"acr": "pwd"}, ["mfa"], [])
    mapping.check_authentication({"amr": ["pwd", "otp"]}, [], ["otp"])
    for amr in (["pwd"], "otp", None):
        with pytest.raises(Refused):
            mapping.check_authentication({"amr": amr}, [], ["otp"])


def test_several_audiences_need_this_portal_as_authorised_party():
    mapping.check_audience({"aud": ["portal", "other"], "azp": "portal"}, "portal")
    mapping.check_audience({"aud": "portal"}, "portal")
    with pytest.raises(Refused):
        mapping.check_audience({"aud": ["portal", "other"], "azp": "other"}, "portal")


def test_flags_come_from_the_groups_alone_and_an_unset_list_means_no():
    staff, root = ["hpc-staff"], ["hpc-root"]
    assert mapping.flags(frozenset({"hpc-users"}), [], []) == (False, False)
    assert mapping.flags(frozenset({"hpc-staff"}), staff, []) == (False, True)
    assert mapping.flags(frozenset({"hpc-root"}), staff, root) == (True, True)  # staff too
    assert mapping.flags(frozenset(), staff, root) == (False, False)


def test_managed_django_groups_are_names_or_prefixes_and_none_by_default():
    assert not mapping.managed_group("portal-staff", [])
    assert mapping.managed_group("portal-staff", ["portal-staff"])
    assert mapping.managed_group("portal-gpu", ["portal-*"])
    assert not mapping.managed_group("wheel", ["portal-*"])
    assert not mapping.managed_group("portal", ["portal-*"])
    assert not mapping.managed_group("anything", ["*"])  # a bare * is no pattern
