"""Files in a job's work directory, read over SFTP on one account's connection: logs,
the session's connection file, metrics files, the file browser's listings and downloads.

Everything there was written by the user's job: a path is walked one name at a time
without following links, only regular files are opened (never a FIFO or a device), and
every read is bounded in bytes and every listing in entries.
"""

from __future__ import annotations

import errno
import json
import re
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from clusters import pool, ssh
from common import validators


@dataclass(frozen=True)
class LogTail:
    text: str
    size: int  # whole file size in bytes
    truncated: bool  # True when text starts after the beginning (tail) or stops early (offset)
    start: int = 0  # text is the file's bytes [start, end): a follower asks for offset=end next
    end: int = 0


def whole_utf8(data: bytes) -> bytes:
    """``data`` without a trailing, incomplete UTF-8 sequence (the rest of it is read next)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # continuation byte: look further back for the lead
            continue
        if byte < 0x80:
            return data
        needed = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
        return data[:-back] if needed > back else data
    return data


def log_slice(data: bytes, start: int, size: int, *, whole_lines: bool) -> LogTail:
    """Pure: the part of ``data`` (read at ``start`` of a ``size``-byte file) worth showing.
    A tail (``whole_lines`` and start > 0) drops its partial first line; a read that stopped
    before the end of the file ends at its last complete line; neither splits a character."""
    skip = 0
    if whole_lines and start > 0:
        skip = data.find(b"\n") + 1 if b"\n" in data else 0
    body = data[skip:]
    stopped_early = start + len(data) < size
    if stopped_early and not whole_lines and b"\n" in body:
        body = body[: body.rfind(b"\n") + 1]
    body = whole_utf8(body)
    first = start + skip
    truncated = first > 0 if whole_lines else stopped_early
    return LogTail(body.decode(errors="replace"), size, truncated, first, first + len(body))


class NotARegularFile(ssh.ClusterError):
    """A job's file is a link, FIFO, device or directory: the portal reads none of them."""


def _missing(exc: OSError) -> bool:
    return getattr(exc, "errno", None) == errno.ENOENT or isinstance(exc, FileNotFoundError)


def _check_regular(path: str, attrs) -> None:
    if not stat.S_ISREG(attrs.st_mode or 0):
        kind = _FILE_KINDS.get(stat.S_IFMT(attrs.st_mode or 0), "not a regular file")
        raise NotARegularFile(
            f"{path.rsplit('/', 1)[-1]} is {kind}; the portal reads only regular files."
        )


_FILE_KINDS = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFSOCK: "a socket",
}


@contextmanager
def open_regular(sftp, path: str):
    """Open a job's file for reading only if it is a regular file: ``lstat`` (no link is
    followed) before the open and ``fstat`` of the open handle after it (the file may have
    been swapped in between). Yields (handle, size)."""
    _check_regular(path, sftp.lstat(path))
    with sftp.open(path, "rb") as handle:
        attrs = handle.stat()
        _check_regular(path, attrs)
        yield handle, attrs.st_size or 0


def _read(conn: ssh.Connection, path: str, offset: int | None, max_bytes: int) -> LogTail:
    with conn.sftp_session() as sftp:
        try:
            with open_regular(sftp, path) as (handle, size):
                if offset is None:
                    start = max(0, size - max_bytes)
                else:
                    start = offset if offset <= size else 0  # rewritten shorter: start over
                handle.seek(start)
                data = handle.read(max_bytes)
        except OSError as exc:
            if _missing(exc):
                return LogTail("", 0, False)
            raise
    return log_slice(data, start, size, whole_lines=offset is None)


def tail(conn: ssh.Connection, path: str, max_bytes: int) -> LogTail:
    """The last ``max_bytes`` of a remote file over SFTP ('' when it does not exist yet)."""
    return _read(conn, path, None, max_bytes)


LOG_STREAMS = ("stdout", "stderr")


def read_job_log(
    job, stream: str, max_bytes: int | None = None, offset: int | None = None
) -> LogTail:
    """The end of a job's stdout or stderr (or, with ``offset``, what follows that byte),
    read over SFTP with a size bound."""
    from django.conf import settings

    if stream not in LOG_STREAMS:
        raise ValueError(f"stream must be one of {LOG_STREAMS}, not {stream!r}")
    if not job.work_dir or job.cluster_account is None:
        return LogTail("", 0, False)
    limit = max_bytes or settings.PORTAL_LOG_TAIL_BYTES
    path = f"{job.work_dir}/{stream}.log"
    return pool.with_connection(job.cluster_account, lambda conn: _read(conn, path, offset, limit))


def read_connection_file(conn: ssh.Connection, work_dir: str) -> dict | None:
    """The notebook's connection.json ({port, secret}, and the attempt that wrote it where
    the scheduler says: Slurm's restart count) once it exists, else None."""

    data = tail(conn, f"{work_dir}/connection.json", 4096)
    if not data.text.strip():
        return None
    try:
        info = json.loads(data.text)
        port = int(info["port"])
        secret = str(info["secret"])
    except (ValueError, KeyError, TypeError):
        return None
    if not (1024 <= port <= 65535) or not validators.SESSION_TOKEN.match(secret):
        return None
    found: dict = {"port": port, "secret": secret}
    if "attempt" in info:
        attempt = info["attempt"]
        if isinstance(attempt, bool) or not isinstance(attempt, int) or not 0 <= attempt < 10**6:
            return None
        found["attempt"] = attempt
    return found


# Each rank's file, and a session's system sampler's (portal_metrics.py --system).
METRICS_FILE = re.compile(r"^(rank-\d{1,6}|system)\.jsonl\Z")


def list_metric_files(conn: ssh.Connection, directory: str) -> list[tuple[str, int]]:
    """(name, size) of the metrics files in ``directory``, by name; [] when it is missing."""
    with conn.sftp_session() as sftp:
        try:
            entries = sftp.listdir_attr(directory)
        except OSError as exc:
            if _missing(exc):
                return []
            raise
    return sorted((e.filename, e.st_size or 0) for e in entries if METRICS_FILE.match(e.filename))


def read_chunk(conn: ssh.Connection, path: str, start: int, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of a regular file from ``start`` (b"" when it is missing)."""
    with conn.sftp_session() as sftp:
        try:
            with open_regular(sftp, path) as (handle, size):
                want = min(size - start, max_bytes)
                if want <= 0:
                    return b""
                handle.seek(start)
                handle.prefetch(want)
                return handle.read(want)
        except OSError as exc:
            if _missing(exc):
                return b""
            raise


# --- a job's work directory, browsed and downloaded from the job page --------------------

# The portal's own files in a work directory: secrets (registration, metrics token, the
# notebook's connection) are never listed or served, even to the owner.
PRIVATE_FILES = frozenset({".portal_secret", ".portal_metrics_token", "connection.json"})
MAX_LISTED = 1000


class BadPath(ValueError):
    """A path that does not name something inside a job's work directory."""


@dataclass(frozen=True)
class DirEntry:
    name: str
    kind: str  # "dir", "file" or what else it is ("a symbolic link", "a FIFO", ...)
    size: int
    modified: datetime | None


def work_path_parts(rel: str) -> list[str]:
    """'a/b' -> ['a', 'b']; refuses anything that could leave the directory or is not a
    plain name ('..', absolute, NUL, over-long), and the portal's private files."""
    parts = [p for p in (rel or "").split("/") if p not in ("", ".")]
    if len(parts) > 32 or len(rel or "") > 4096:
        raise BadPath("That path is too deep.")
    for part in parts:
        if part == ".." or "\x00" in part or len(part.encode()) > 255:
            raise BadPath("Not a path inside the job's work directory.")
    if parts and parts[0] in PRIVATE_FILES:
        raise BadPath("That is one of the portal's private files.")
    return parts


def _walk_to(sftp, work_dir: str, parts: list[str]) -> str:
    """The path of ``parts`` under ``work_dir``, every directory on the way lstat'd: a link
    anywhere (the job's to make) could lead out of the work directory."""
    path = work_dir
    for part in parts[:-1]:
        path = f"{path}/{part}"
        if not stat.S_ISDIR(sftp.lstat(path).st_mode or 0):
            raise BadPath(f"{part} is not a directory.")
    return f"{path}/{parts[-1]}" if parts else path


def list_work_dir(conn: ssh.Connection, work_dir: str, rel: str) -> tuple[list[DirEntry], int]:
    """The entries of a directory in a job's work directory (links and FIFOs are shown for
    what they are, never followed), directories first, by name, at most MAX_LISTED; and
    how many there are in all."""
    parts = work_path_parts(rel)
    with conn.sftp_session() as sftp:
        path = _walk_to(sftp, work_dir, parts)
        if parts and not stat.S_ISDIR(sftp.lstat(path).st_mode or 0):
            raise BadPath(f"{parts[-1]} is not a directory.")
        attrs = sftp.listdir_attr(path)  # OpenSSH's sftp-server reports lstat() here
    entries = []
    for a in attrs:
        if not parts and a.filename in PRIVATE_FILES:
            continue
        mode = a.st_mode or 0
        kind = (
            "dir"
            if stat.S_ISDIR(mode)
            else "file"
            if stat.S_ISREG(mode)
            else _FILE_KINDS.get(stat.S_IFMT(mode), "not a regular file")
        )
        modified = datetime.fromtimestamp(a.st_mtime, tz=UTC) if a.st_mtime else None
        entries.append(DirEntry(a.filename, kind, a.st_size or 0, modified))
    entries.sort(key=lambda e: (e.kind != "dir", e.name))
    return entries[:MAX_LISTED], len(entries)


def work_file_size(conn: ssh.Connection, work_dir: str, rel: str) -> tuple[str, int, float]:
    """(path, size, mtime) of a regular file in a job's work directory, for a download."""
    parts = work_path_parts(rel)
    if not parts:
        raise BadPath("Choose a file.")
    with conn.sftp_session() as sftp:
        path = _walk_to(sftp, work_dir, parts)
        attrs = sftp.lstat(path)
    _check_regular(path, attrs)
    return path, attrs.st_size or 0, float(attrs.st_mtime or 0)


# Checks that what a catalog image needs is on the cluster's login node. Arguments: a
# nonce that marks the answer lines, then three per image: the runtime's command ('' for
# the host), the image location, and its modules one per line.
