"""Provider groups that extend or narrow projects (PORTAL_PROJECT_GROUPS): "<group>=
<cluster>/<account>[:<role>]" makes the people whose identity provider puts them in <group>
members of that project with at least <role> (viewer by default; manager: managers come
from a group as well as from the scheduler's coordinators); ":only" instead keeps of the
scheduler's members of that project only those in <group>. The project must exist on the cluster (read
from its scheduler): a group never invents an account, and a person added by a group may
see the project's runs but launches on the account only if the scheduler lets them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings

_ENTRY = re.compile(
    r"^(?P<group>[^=\s]{1,150})=(?P<cluster>[A-Za-z0-9_-]{1,64})/"
    r"(?P<account>[A-Za-z0-9][A-Za-z0-9_.-]{0,63})(?::(?P<role>viewer|member|manager|only))?\Z"
)


# A grant that narrows instead of extending: the project's members are the scheduler's
# who are also in the group.
ONLY = "only"


@dataclass(frozen=True)
class Grant:
    group: str
    cluster: str
    account: str
    role: str


def parse(entries: list[str]) -> tuple[list[Grant], list[str]]:
    """The grants, and the entries that are not one (each with why)."""
    grants, errors = [], []
    for entry in entries:
        match = _ENTRY.match(entry.strip())
        if match is None:
            errors.append(
                f"PORTAL_PROJECT_GROUPS entry {entry[:60]!r} is not "
                "<group>=<cluster>/<account>[:viewer|member|manager|only]"
            )
            continue
        grants.append(
            Grant(match["group"], match["cluster"], match["account"], match["role"] or "viewer")
        )
    return grants, errors


def configured() -> list[Grant]:
    return parse(settings.PORTAL_PROJECT_GROUPS)[0]
