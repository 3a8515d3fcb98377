"""What a version's files are, read on the cluster as the person who registers them: each
regular file's path (relative to the version's folder), size and sha256, in one bounded
command (a count of files, a total of bytes, a time). Symbolic links, FIFOs, sockets and
devices are refused (a version is regular files in folders: nothing that points or
blocks elsewhere). ``registered_model_meta`` at the top is left out: MLflow's client
rewrites it in the folder each time it loads ``models:/name@alias`` from where it sits.

The answer is hostile data: only what follows this call's nonce counts, file names are
NUL-separated (any byte but ``/`` and NUL may be in one), sizes and digests must match
strict patterns, and the two listings (sizes, digests) must agree."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass

from clusters import deadline, pool, ssh
from identity import audit

MAX_FILES = 10_000
MAX_BYTES = 500 * 1024**3  # what a person may register at once: hashing it takes time
NAME_BYTES = 4096
MAX_SECONDS = 600  # at most (a task's deadline may leave less)

# POSIX sh with GNU find and coreutils (sha256sum -z: 8.30 and later).
_SCRIPT = r"""
nonce=$1 path=$2 max_files=$3 max_bytes=$4
say() { printf '\n%s %s\n' "$nonce" "$1"; }
if [ -L "$path" ]; then say "refused the path is a symbolic link"; exit 0; fi
if [ -d "$path" ]; then
    cd -P -- "$path" 2>/dev/null || { say "refused the folder cannot be read"; exit 0; }
    top=.
elif [ -f "$path" ]; then
    cd -P -- "$(dirname -- "$path")" 2>/dev/null || { say "refused the folder cannot be read"; exit 0; }
    top="./$(basename -- "$path")"
else
    say "refused there is no file or folder there"; exit 0
fi
odd=$(find "$top" ! -type f ! -type d -printf '%y ' -quit 2>/dev/null)
if [ -n "$odd" ]; then
    say "special $odd"
    find "$top" ! -type f ! -type d -printf '%p' -quit 2>/dev/null
    exit 0
fi
count=$(find "$top" -type f ! -path ./registered_model_meta -printf 'x\n' 2>/dev/null | head -n $((max_files + 1)) | wc -l)
if [ "$count" -gt "$max_files" ]; then say "too-many"; exit 0; fi
total=$(find "$top" -type f ! -path ./registered_model_meta -printf '%s\n' 2>/dev/null | awk '{ t += $1 } END { printf "%.0f", t }')
if [ "$total" -gt "$max_bytes" ]; then say "too-big $total"; exit 0; fi
say sizes
find "$top" -type f ! -path ./registered_model_meta -printf '%s %p\0' 2>/dev/null
say sums
find "$top" -type f ! -path ./registered_model_meta -print0 2>/dev/null | xargs -0 -r sha256sum -z -- 2>/dev/null
say end
"""

_SIZE = re.compile(rb"([0-9]{1,18}) (\./.*)\Z", re.S)
_SUM = re.compile(rb"([0-9a-f]{64})  (\./.*)\Z", re.S)

KIND = {"l": "a symbolic link", "p": "a FIFO", "s": "a socket", "b": "a device", "c": "a device"}


class ManifestError(Exception):
    """Why the files cannot be a version (a message for the person)."""


@dataclass(frozen=True)
class Manifest:
    entries: list[tuple[str, int, str]]  # (relative path, size, sha256), sorted by path

    @property
    def digest(self) -> str:
        return digest_of(self.entries)

    @property
    def total_bytes(self) -> int:
        return sum(size for _, size, _ in self.entries)


def digest_of(entries: list[tuple[str, int, str]] | list[list]) -> str:
    canonical = json.dumps([list(e) for e in entries], separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _name(raw: bytes) -> str:
    if len(raw) > NAME_BYTES:
        raise ManifestError("A file name in the folder is over 4096 bytes.")
    return raw.removeprefix(b"./").decode(errors="replace") or "."


def parse(stdout: bytes, nonce: str, *, max_files: int | None = None) -> Manifest:
    """The script's answer, as data (pure): the manifest, or ManifestError saying why."""
    max_files = MAX_FILES if max_files is None else max_files
    mark = b"\n" + nonce.encode() + b" "
    parts = stdout.split(mark)
    said: dict[str, bytes] = {}
    for part in parts[1:]:
        word, _, rest = part.partition(b"\n")
        key, _, value = word.partition(b" ")
        said[key.decode(errors="replace")] = value + (b"\n" + rest if rest else b"")
    if "refused" in said:
        reason = said["refused"].split(b"\n", 1)[0].decode(errors="replace")
        raise ManifestError(f"Cannot register it: {re.sub(r'[^ -~]', '', reason)[:200]}.")
    if "special" in said:
        kind, _, odd = said["special"].partition(b"\n")
        what = KIND.get(kind.decode(errors="replace").strip(), "not a regular file")
        shown = _name(odd.split(b"\0", 1)[0][:300])
        raise ManifestError(
            f"{shown[:200]} is {what}: a version holds regular files and folders only."
        )
    if "too-many" in said:
        raise ManifestError(f"The folder holds more than {max_files} files.")
    if "too-big" in said:
        total = said["too-big"].split(b"\n", 1)[0].decode(errors="replace")
        raise ManifestError(f"The files are {total[:20]} bytes, over the portal's bound.")
    if "end" not in said or "sizes" not in said or "sums" not in said:
        raise ManifestError("The cluster's answer was cut short: try again.")
    sizes: dict[str, int] = {}
    for record in _records(said["sizes"]):
        found = _SIZE.match(record)
        if found is None:
            raise ManifestError("The cluster's list of file sizes did not read.")
        sizes[_name(found[2])] = int(found[1])
    entries: list[tuple[str, int, str]] = []
    for record in _records(said["sums"]):
        summed = _SUM.match(record)
        if summed is None:
            raise ManifestError("The cluster's list of file digests did not read.")
        name = _name(summed[2])
        if name not in sizes:
            raise ManifestError(f"{name[:200]} changed while it was read: try again.")
        entries.append((name, sizes.pop(name), summed[1].decode()))
    if sizes or len(entries) > max_files:
        raise ManifestError("The files changed while they were read: try again.")
    if not entries:
        raise ManifestError("There are no files there.")
    return Manifest(sorted(entries))


def _records(section: bytes) -> list[bytes]:
    """NUL-terminated records between a marker's line and the next marker."""
    body = section.removeprefix(b"\n") if section.startswith(b"\n") else section
    return [r for r in body.split(b"\0") if r.strip(b"\n")]


def read(conn: ssh.Connection, path: str, *, timeout: float = MAX_SECONDS) -> Manifest:
    """The manifest of ``path`` on the cluster ``conn`` reaches, as its user, in one
    command of ``timeout`` seconds at most (there and here)."""
    nonce = secrets.token_hex(8)
    remote = max(1, int(timeout) - 1)
    argv = [
        "timeout",
        "-s",
        "KILL",
        str(remote),
        "sh",
        "-c",
        _SCRIPT,
        "portal-manifest",
        nonce,
        path,
        str(MAX_FILES),
        str(MAX_BYTES),
    ]
    max_output = MAX_FILES * (NAME_BYTES + 100) * 2 + 64 * 1024
    result = conn.run(argv, check=False, timeout=timeout, max_bytes=max_output)
    return parse(result.stdout.encode(), nonce, max_files=MAX_FILES)


def read_as(user, account, path: str, target: str) -> Manifest:
    """The manifest of ``path`` read as ``user`` over their ``account``'s pooled
    connection, audited (``file_list``, ``target``), within what is left of the task's
    deadline (MAX_SECONDS at most). One try: the calling task retries a ClusterError."""
    with audit.action(audit.Action.FILE_LIST, user=user, account=account, target=target):
        left = deadline.left()
        budget = MAX_SECONDS if left is None else min(MAX_SECONDS, left)
        return pool.with_connection(
            account, lambda conn: read(conn, path, timeout=budget), retry=False
        )
