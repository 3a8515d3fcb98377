"""A run's checkpoints as they are on the cluster, read as the run's owner: each file or
folder under the work directory whose name matches the policy's patterns (a matching
folder, like ``checkpoint-500/``, is one checkpoint: nothing inside it is looked at
apart), with what it costs on disk (``du``: blocks, so a sparse file costs what it
holds). Symbolic links, FIFOs, sockets and devices are never listed, so never deleted.

One bounded command (a depth, a count, a time). The answer is hostile data: only what
follows this call's nonce counts, names are NUL-separated and sizes must be numbers."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from clusters import ssh

MAX_CHECKPOINTS = 1_000
MAX_DEPTH = 6
NAME_BYTES = 4096
MAX_SECONDS = 120

_SCRIPT = r"""
nonce=$1 dir=$2 depth=$3 max=$4; shift 4
say() { printf '\n%s %s\n' "$nonce" "$1"; }
cd -P -- "$dir" 2>/dev/null || { say "refused the run's folder cannot be read"; exit 0; }
for p do shift; set -- "$@" -o -name "$p"; done; shift
say list
find . -mindepth 1 -maxdepth "$depth" \( -type f -o -type d \) \( "$@" \) -prune -print0 2>/dev/null \
    | head -z -n $((max + 1)) | du -0 -s -B1 --files0-from=- 2>/dev/null
say end
"""

_ENTRY = re.compile(rb"([0-9]{1,20})\t\./(.+)\Z", re.S)


class ListingError(Exception):
    """Why the checkpoints cannot be listed (a message for the person)."""


@dataclass(frozen=True)
class Found:
    path: str  # relative to the work directory, without "./"
    bytes: int


def parse(stdout: bytes, nonce: str, *, max_items: int = MAX_CHECKPOINTS) -> list[Found]:
    """The script's answer, as data (pure)."""
    said: dict[str, bytes] = {}
    for part in stdout.split(b"\n" + nonce.encode() + b" ")[1:]:
        word, _, rest = part.partition(b"\n")
        said[word.decode(errors="replace").split(" ", 1)[0]] = rest
        if word.startswith(b"refused "):
            reason = word.removeprefix(b"refused ").decode(errors="replace")
            raise ListingError(
                f"Cannot list the checkpoints: {re.sub(r'[^ -~]', '', reason)[:200]}."
            )
    if "end" not in said or "list" not in said:
        raise ListingError("The cluster's answer was cut short: try again.")
    found: list[Found] = []
    for record in said["list"].split(b"\0"):
        if not record.strip(b"\n"):
            continue
        entry = _ENTRY.match(record)
        if entry is None:
            raise ListingError("The cluster's list of checkpoints did not read.")
        name = entry[2]
        if len(name) > NAME_BYTES:
            raise ListingError("A checkpoint's name is over 4096 bytes.")
        path = name.decode(errors="replace")
        if ".." in path.split("/"):
            raise ListingError("The cluster's list of checkpoints did not read.")
        found.append(Found(path, int(entry[1])))
    if len(found) > max_items:
        raise ListingError(
            f"The run holds more than {max_items} checkpoints: narrow the policy's patterns."
        )
    return sorted(found, key=lambda f: f.path)


def read(
    conn: ssh.Connection, work_dir: str, patterns: list[str], *, timeout: float = MAX_SECONDS
) -> list[Found]:
    """The checkpoints under ``work_dir`` whose names match ``patterns``, as the user
    ``conn`` logs in as, in one command of ``timeout`` seconds at most."""
    nonce = secrets.token_hex(8)
    argv = [
        "timeout",
        "-s",
        "KILL",
        str(max(1, int(timeout) - 1)),
        "sh",
        "-c",
        _SCRIPT,
        "portal-retention",
        nonce,
        work_dir,
        str(MAX_DEPTH),
        str(MAX_CHECKPOINTS),
        *patterns,
    ]
    max_output = (MAX_CHECKPOINTS + 1) * (NAME_BYTES + 30) + 4096
    result = conn.run(argv, check=False, timeout=timeout, max_bytes=max_output)
    return parse(result.stdout.encode(), nonce)


def delete(conn: ssh.Connection, work_dir: str, paths: list[str], *, timeout: float) -> None:
    """Remove ``paths`` (relative to ``work_dir``; a folder with what it holds) as the user
    ``conn`` logs in as. ``rm`` never follows a link it is given or meets; a path with a
    ``..`` part or a leading ``/`` is refused here, never sent."""
    for path in paths:
        if not path or path.startswith("/") or ".." in path.split("/"):
            raise ListingError(f"{path[:200]!r} is not a path inside the run's folder.")
    for start in range(0, len(paths), 200):
        batch = [f"./{p}" for p in paths[start : start + 200]]
        argv = [
            "timeout",
            "-s",
            "KILL",
            str(max(1, int(timeout) - 1)),
            "sh",
            "-c",
            'cd -P -- "$1" && shift && rm -rf -- "$@"',
            "portal-retention",
            work_dir,
            *batch,
        ]
        conn.run(argv, check=True, timeout=timeout, max_bytes=64 * 1024)
