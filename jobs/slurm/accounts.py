"""Slurm's accounts, read for projects (projects/sync.py): each account of this cluster
with its associated users (``sacctmgr show assoc``), its coordinators (``show account
withcoord``) and each user's default account (``show user``), in one SSH command.

Names are an administrator's, but parsed as data all the same: a field that is not a
valid account or user name is skipped, and the output is bounded in bytes and lines."""

from __future__ import annotations

import re

from jobs.cluster import ssh
from jobs.seam import AccountRecord, AccountsRead
from jobs.slurm import parsers

# Fixed text: nothing is interpolated. Associations of the local cluster only (one
# slurmdbd often keeps several clusters); every section is marked by a line of its own.
READ_ACCOUNTS = r"""
cluster=$(scontrol show config 2>/dev/null | sed -n 's/^ClusterName *= *//p' | head -n 1)
echo '#assoc'
sacctmgr -n -P show assoc ${cluster:+"cluster=$cluster"} format=account,user
echo '#coord'
sacctmgr -n -P show account withcoord format=account,coordinators
echo '#default'
sacctmgr -n -P show user format=user,defaultaccount
"""

MAX_BYTES = 8 * 1024 * 1024
MAX_LINES = 200_000
SECTIONS = ("#assoc", "#coord", "#default")

_ACCOUNT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_USER = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}\Z")


def read(conn: ssh.Connection) -> AccountsRead:
    result = ssh.run_scheduler_command(
        conn, ["bash", "-c", READ_ACCOUNTS], parsers.is_transient, max_bytes=MAX_BYTES
    )
    return parse(result.stdout)


def parse(text: str) -> AccountsRead:
    """The three sections of READ_ACCOUNTS' output. Slurm's own accounts ``root`` is left
    out (its users are the cluster's administrators, not a team)."""
    users: dict[str, set[str]] = {}
    coordinators: dict[str, set[str]] = {}
    defaults: dict[str, str] = {}
    section = ""
    for number, line in enumerate(text.splitlines()):
        if number >= MAX_LINES:
            break
        if line in SECTIONS:
            section = line
            continue
        fields = line.split("|")
        if len(fields) < 2:
            continue
        first, second = fields[0].strip(), fields[1].strip()
        if section == "#assoc" and _ACCOUNT.match(first):
            members = users.setdefault(first, set())
            if _USER.match(second):
                members.add(second)
        elif section == "#coord" and _ACCOUNT.match(first):
            named = {u.strip() for u in second.split(",")}
            coordinators[first] = {u for u in named if _USER.match(u)}
        elif section == "#default" and _USER.match(first) and _ACCOUNT.match(second):
            defaults[first] = second
    records = tuple(
        AccountRecord(
            name=name,
            users=frozenset(members),
            coordinators=frozenset(coordinators.get(name, set())),
        )
        for name, members in sorted(users.items())
        if name != "root"
    )
    return AccountsRead(accounts=records, defaults=defaults)
