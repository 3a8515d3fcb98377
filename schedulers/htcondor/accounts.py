"""HTCondor's accounting groups as projects: the pool's map of users to groups, the one
HTCondor's manual configures to assign each job its group ("Groups": ``SCHEDD_CLASSAD_USER
_MAP_NAMES`` names it, ``CLASSAD_USER_MAPFILE_Groups`` is its file, a job transform sets
``AcctGroup`` from it). Each line ``* <user> <group>[,<group>...]`` makes the user a member
of those groups, the first their default. Lines that name users by pattern (``/regex/``)
name no one and are skipped; so is every name that is not a name. Bounded in bytes and
lines; no file, no groups (the pool assigns none)."""

from __future__ import annotations

import re

from clusters import ssh
from schedulers.htcondor import parsers
from schedulers.seam import AccountRecord, AccountsRead

# Fixed text. The map's path comes from the pool's own configuration, read by head in
# bounded bytes (never followed if it is not a regular file).
READ = r"""
file=$(condor_config_val CLASSAD_USER_MAPFILE_Groups 2>/dev/null) || exit 0
[ -n "$file" ] && [ -f "$file" ] || exit 0
head -c 4194304 -- "$file"
"""

MAX_BYTES = 4 * 1024 * 1024 + 1024
MAX_LINES = 100_000
MAX_GROUPS_PER_USER = 64
_GROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_USER = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}\Z")


def read(conn: ssh.Connection) -> AccountsRead:
    result = ssh.run_scheduler_command(
        conn, ["bash", "-c", READ], parsers.is_transient, max_bytes=MAX_BYTES
    )
    return parse(result.stdout)


def parse(text: str) -> AccountsRead:
    users: dict[str, set[str]] = {}
    defaults: dict[str, str] = {}
    for number, line in enumerate(text.splitlines()):
        if number >= MAX_LINES:
            break
        words = line.split()
        if len(words) != 3 or words[0] != "*" or not _USER.match(words[1]):
            continue  # a comment, a pattern, another method's line, or not a name
        groups = [g for g in words[2].split(",")[:MAX_GROUPS_PER_USER] if _GROUP.match(g)]
        for group in groups:
            users.setdefault(group, set()).add(words[1])
        if groups:
            defaults.setdefault(words[1], groups[0])
    records = tuple(
        AccountRecord(name=name, users=frozenset(members))
        for name, members in sorted(users.items())
    )
    return AccountsRead(accounts=records, defaults=defaults)
