"""Slurm's accounts, read for projects (projects/sync.py): each account of this cluster
with its associated users (``sacctmgr show assoc``), its coordinators (``show account
withcoord``) and each user's default account (``show user``), in one SSH command; and one
account's use, limits and fair-share for its project page (``read_usage``).

Names are an administrator's, but parsed as data all the same: a field that is not a
valid account or user name is skipped, and the output is bounded in bytes and lines."""

from __future__ import annotations

import re

from clusters import ssh
from schedulers.seam import AccountRecord, AccountsRead, AccountUsage, UsageLine
from schedulers.slurm import parsers

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


# One account's use since a date: accounting's allocations of every user on it (sacct -a -X;
# a running job counts to now), the account's own limits (its association without a user),
# and its fair-share (sshare: its normalised shares and effective usage). $1 the account,
# $2 the first day; both checked before they are passed.
READ_USAGE = r"""
account=$1
since=$2
cluster=$(scontrol show config 2>/dev/null | sed -n 's/^ClusterName *= *//p' | head -n 1)
echo '#usage'
sacct -a -X -n -P -A "$account" -S "$since" -E now -o User,Start,ElapsedRaw,AllocTRES \
    ${cluster:+-M "$cluster"}
echo '#limits'
sacctmgr -n -P show assoc "account=$account" ${cluster:+"cluster=$cluster"} \
    format=user,grptresmins,grptres
echo '#share'
sshare -n -P -A "$account" -o Account,User,NormShares,EffectvUsage 2>/dev/null || true
"""

_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")
_START = re.compile(r"^(\d{4}-\d{2})-\d{2}T")
USAGE_SECTIONS = ("#usage", "#limits", "#share")
# A run longer than a year is a record to distrust, not a figure to add.
MAX_ELAPSED = 366 * 24 * 3600


def read_usage(conn: ssh.Connection, account: str, since: str) -> AccountUsage:
    if not _ACCOUNT.match(account) or not _DAY.match(since):
        raise ValueError("an account name and a day YYYY-MM-DD")
    result = ssh.run_scheduler_command(
        conn,
        ["bash", "-c", READ_USAGE, "read-usage", account, since],
        parsers.is_transient,
        max_bytes=MAX_BYTES,
    )
    return parse_usage(result.stdout, account)


def tres(text: str) -> dict[str, int]:
    """'cpu=4,gres/gpu=2,mem=8G' -> {'cpu': 4, 'gres/gpu': 2} (counts only; a value that is
    not a whole number, such as memory with its unit, is left out)."""
    found: dict[str, int] = {}
    for part in text.split(",")[:64]:
        name, _, value = part.partition("=")
        name = name.strip()
        if name and len(name) <= 64 and value.isascii() and value.isdigit() and len(value) <= 18:
            found[name] = int(value)
    return found


def _fraction(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 <= value <= 1e6 else None


def parse_usage(text: str, account: str) -> AccountUsage:
    """READ_USAGE's output for ``account``: usage summed per user and month."""
    sums: dict[tuple[str, str], list[int]] = {}
    limits: dict[str, dict[str, int]] = {}
    norm_shares = effective = None
    section = ""
    for number, line in enumerate(text.splitlines()):
        if number >= MAX_LINES:
            break
        if line in USAGE_SECTIONS:
            section = line
            continue
        fields = line.split("|")
        if section == "#usage" and len(fields) >= 4:
            user, start, elapsed, alloc = (f.strip() for f in fields[:4])
            month = _START.match(start)
            if not (_USER.match(user) and month and elapsed.isdigit()):
                continue
            seconds = int(elapsed) if len(elapsed) <= 12 else MAX_ELAPSED + 1
            if seconds > MAX_ELAPSED:
                continue
            held = tres(alloc)
            row = sums.setdefault((user, month[1]), [0, 0, 0])
            row[0] += 1
            row[1] += held.get("gres/gpu", 0) * seconds
            row[2] += held.get("cpu", 0) * seconds
        elif section == "#limits" and len(fields) >= 3 and fields[0].strip() == "":
            for name, value in (("GrpTRESMins", fields[1]), ("GrpTRES", fields[2])):
                if counts := tres(value):
                    limits[name] = counts
        elif section == "#share" and len(fields) >= 4:
            if fields[0].strip() == account and fields[1].strip() == "":
                norm_shares, effective = _fraction(fields[2]), _fraction(fields[3])
    lines = tuple(
        UsageLine(user=user, month=month, jobs=n, gpu_seconds=gpu, cpu_seconds=cpu)
        for (user, month), (n, gpu, cpu) in sorted(sums.items())
    )
    return AccountUsage(
        lines=lines, limits=limits, norm_shares=norm_shares, effective_usage=effective
    )
