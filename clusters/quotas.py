"""Storage use as a site writes it for Open OnDemand: quota files in its JSON format
(``{"version": 1, "timestamp": <epoch>, "quotas": [{"type": "user"|"fileset", "user",
"path", "total_block_usage", "block_limit", "total_file_usage", "file_limit",
"block_usage", "file_usage"}]}``, blocks of 1 KiB), read as they are from the cluster
(``Cluster.quota_files``) with the reader's login.

Each file is bounded in bytes, parsed as data (numbers must be whole and non-negative,
names names, paths are text shown escaped); an entry that is not one is skipped."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from clusters import ssh

# Each path a positional argument; fixed text. A file that is not a regular file is skipped.
READ = r"""
for f; do
    echo "#file"
    if [ -f "$f" ]; then head -c 4194304 -- "$f"; fi
    echo
done
"""

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_FILES = 8
MAX_ENTRIES = 100_000
_USER = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}\Z")


@dataclass(frozen=True)
class Quota:
    user: str
    path: str
    kind: str  # "user" or "fileset"
    used_kib: int  # the user's own (fileset: theirs under the volume)
    total_kib: int  # all of it (fileset: everyone's under the volume)
    limit_kib: int
    files: int
    file_limit: int

    @property
    def used_percent(self) -> float | None:
        return 100 * self.total_kib / self.limit_kib if self.limit_kib else None


def read(conn: ssh.Connection, paths: list[str]) -> list[Quota]:
    paths = [p for p in paths if p][:MAX_FILES]
    if not paths:
        return []
    result = conn.run(
        ["bash", "-c", READ, "quotas", *paths], max_bytes=(MAX_FILE_BYTES + 64) * len(paths)
    )
    return parse(result.stdout)


def _count(value) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or value < 0 or value > 2**62:  # NaN, negative, absurd
        return None
    return int(value)


def parse(text: str) -> list[Quota]:
    found: list[Quota] = []
    for chunk in text.split("#file\n")[1:]:
        try:
            document = json.loads(chunk) if chunk.strip() else {}
        except (ValueError, RecursionError):
            continue
        entries = document.get("quotas") if isinstance(document, dict) else None
        if not isinstance(entries, list):
            continue
        for entry in entries[:MAX_ENTRIES]:
            quota = _entry(entry)
            if quota is not None:
                found.append(quota)
    return found


def _entry(entry) -> Quota | None:
    if not isinstance(entry, dict):
        return None
    user, path = entry.get("user"), entry.get("path")
    kind = entry.get("type", "user")
    if not (isinstance(user, str) and _USER.match(user) and isinstance(path, str)):
        return None
    if kind not in ("user", "fileset") or not 0 < len(path) <= 4096:
        return None
    total = _count(entry.get("total_block_usage"))
    limit = _count(entry.get("block_limit"))
    own = _count(entry.get("block_usage")) if kind == "fileset" else total
    files = _count(entry.get("total_file_usage" if kind == "user" else "file_usage")) or 0
    if total is None or limit is None or own is None:
        return None
    return Quota(
        user=user,
        path=path,
        kind=kind,
        used_kib=own,
        total_kib=total,
        limit_kib=limit,
        files=files,
        file_limit=_count(entry.get("file_limit")) or 0,
    )
