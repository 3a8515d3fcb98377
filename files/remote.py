"""File manager operations over SFTP, on one connection as the person's own cluster user.

Everything under a root was written by someone's jobs: a path is walked one name at a
time with ``lstat`` (a symbolic link on the way is refused, so nothing leads out of the
root), only regular files are read (never a FIFO or a device: clusters.files), a
listing is bounded in entries, and a recursive delete in entries and never follows a
link (it removes the link). The root itself may be a link (a site's /home often is)."""

from __future__ import annotations

import stat
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from paramiko.sftp import (
    CMD_DATA,
    CMD_EXTENDED,
    CMD_EXTENDED_REPLY,
    CMD_READ,
    CMD_STATUS,
    SFTP_EOF,
    int64,
)

from clusters import files
from clusters.files import NotARegularFile
from common.paths import BadPath, new_name

MAX_LISTED = 200_000  # a folder with more is refused (listing it would be a stall)
MAX_DELETED = 100_000  # entries one delete removes at most
KINDS = {
    stat.S_IFDIR: "dir",
    stat.S_IFREG: "file",
    stat.S_IFLNK: "link",
    stat.S_IFIFO: "fifo",
    stat.S_IFCHR: "device",
    stat.S_IFBLK: "device",
    stat.S_IFSOCK: "socket",
}


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str  # dir, file, link, fifo, device, socket, other
    size: int
    modified: datetime | None


def _kind(mode: int | None) -> str:
    return KINDS.get(stat.S_IFMT(mode or 0), "other")


def walk(sftp, root: str, parts: list[str], *, want_dir: bool | None = None) -> str:
    """The absolute path of ``parts`` under ``root``; every folder on the way (and the
    last name when ``want_dir``) lstat'd: a link anywhere inside the root is refused."""
    path = root
    for i, part in enumerate(parts):
        path = f"{path}/{part}"
        last = i == len(parts) - 1
        if last and want_dir is None:
            break
        kind = _kind(sftp.lstat(path).st_mode)
        if (not last or want_dir) and kind != "dir":
            raise BadPath(f"{part} is not a folder" + (" (a link)" if kind == "link" else "") + ".")
        if last and want_dir is False and kind == "dir":
            raise BadPath(f"{part} is a folder.")
    return path


def _children(sftp, path: str, limit: int) -> list:
    """A folder's entries, read whole (paramiko's pipelined reads of two folders at once,
    one iterator inside another, take each other's answers and stall), at most ``limit``."""
    found: list[Any] = []
    for attrs in sftp.listdir_iter(path, read_aheads=64):
        if len(found) >= limit:
            raise BadPath(f"A folder holds more than {limit:,} entries.")
        found.append(attrs)
    return found


def listing(sftp, path: str) -> list[Entry]:
    """The folder's entries as the server reports them (lstat: links are not followed)."""
    entries = []
    for attrs in _children(sftp, path, MAX_LISTED):
        modified = datetime.fromtimestamp(attrs.st_mtime, tz=UTC) if attrs.st_mtime else None
        entries.append(Entry(attrs.filename, _kind(attrs.st_mode), attrs.st_size or 0, modified))
    return entries


SORTS = {
    "name": lambda e: (e.kind != "dir", e.name),
    "size": lambda e: (e.kind != "dir", e.size, e.name),
    "modified": lambda e: (e.kind != "dir", e.modified or datetime.min.replace(tzinfo=UTC), e.name),
}


def ordered(entries: list[Entry], sort: str, descending: bool) -> list[Entry]:
    """Folders first, then by ``sort`` (name, size or modified)."""
    key = SORTS.get(sort, SORTS["name"])
    folders = sorted((e for e in entries if e.kind == "dir"), key=key, reverse=descending)
    rest = sorted((e for e in entries if e.kind != "dir"), key=key, reverse=descending)
    return folders + rest


def _exists(sftp, path: str) -> bool:
    try:
        sftp.lstat(path)
    except FileNotFoundError:
        return False
    return True


def make_folder(sftp, parent: str, name: str) -> str:
    path = f"{parent}/{name}"
    if _exists(sftp, path):
        raise BadPath(f"{name} already exists.")
    sftp.mkdir(path)
    return path


def rename(sftp, source: str, target_folder: str, name: str) -> str:
    """Move ``source`` into ``target_folder`` as ``name``; never over something."""
    target = f"{target_folder}/{name}"
    if target == source or target.startswith(source + "/"):
        raise BadPath("A folder cannot move into itself.")
    if _exists(sftp, target):
        raise BadPath(f"{name} already exists there.")
    sftp.rename(source, target)  # SFTP's rename refuses an existing target too
    return target


@dataclass
class Survey:
    files: int = 0
    folders: int = 0
    other: int = 0  # links, FIFOs, devices: removed, never followed
    bytes: int = 0

    @property
    def entries(self) -> int:
        return self.files + self.folders + self.other

    def words(self) -> str:
        return (
            f"{self.files:,} file{'s' if self.files != 1 else ''} "
            f"({self.bytes:,} bytes), {self.folders:,} folder{'s' if self.folders != 1 else ''}"
            + (f" and {self.other:,} other entries (links, FIFOs)" if self.other else "")
        )


def _tree(sftp, path: str, survey: Survey, seen: list[tuple[str, str]], deadline: float):
    """Depth first, children before their folder; links are leaves."""
    attrs = sftp.lstat(path)
    kind = _kind(attrs.st_mode)
    if kind == "dir":
        for child in _children(sftp, path, MAX_DELETED):
            if survey.entries >= MAX_DELETED or time.monotonic() > deadline:
                raise BadPath(
                    f"More than {MAX_DELETED:,} entries (or too slow to count): delete it "
                    "from a terminal on the cluster."
                )
            name = child.filename
            if _kind(child.st_mode) == "dir":
                _tree(sftp, f"{path}/{name}", survey, seen, deadline)
            else:
                survey.other += _kind(child.st_mode) != "file"
                survey.files += _kind(child.st_mode) == "file"
                survey.bytes += (child.st_size or 0) if _kind(child.st_mode) == "file" else 0
                seen.append((f"{path}/{name}", "leaf"))
        survey.folders += 1
        seen.append((path, "dir"))
    else:
        survey.files += kind == "file"
        survey.other += kind != "file"
        survey.bytes += (attrs.st_size or 0) if kind == "file" else 0
        seen.append((path, "leaf"))


def survey(sftp, path: str, seconds: float = 60) -> tuple[Survey, list[tuple[str, str]]]:
    """What deleting ``path`` removes, and the order to remove it in."""
    found, order = Survey(), []  # type: tuple[Survey, list[tuple[str, str]]]
    _tree(sftp, path, found, order, time.monotonic() + seconds)
    return found, order


def delete(sftp, path: str) -> Survey:
    """Remove ``path`` (a folder with everything in it); returns what was removed."""
    found, order = survey(sftp, path)
    for item, kind in order:
        if kind == "dir":
            sftp.rmdir(item)
        else:
            sftp.remove(item)
    return found


TEXT_MAX = 1024 * 1024
IMAGE_MAX = 20 * 1024 * 1024
IMAGES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_type(head: bytes) -> str:
    """The image type of these first bytes ('' if none the portal shows): from the bytes,
    never the name; no SVG (it runs scripts)."""
    for magic, kind in IMAGES:
        if head.startswith(magic):
            return kind
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return ""


def read_head(sftp, path: str, max_bytes: int) -> tuple[bytes, int]:
    """Up to ``max_bytes`` from the start of a regular file, and its size."""
    with files.open_regular(sftp, path) as (handle, size):
        return handle.read(min(size, max_bytes)), size


def regular_size(sftp, path: str) -> tuple[int, float]:
    """(size, mtime) of a regular file (NotARegularFile otherwise), for a download."""
    attrs = sftp.lstat(path)
    if not stat.S_ISREG(attrs.st_mode or 0):
        raise NotARegularFile(f"{path.rsplit('/', 1)[-1]} is not a regular file.")
    return attrs.st_size or 0, float(attrs.st_mtime or 0)


# --- uploads (files/uploads.py) -----------------------------------------------------


class Conflict(BadPath):
    """The request does not fit the file as it is on the cluster (a 409)."""


def make_folders(sftp, root: str, parts: list[str]) -> str:
    """``walk`` that makes the missing folders on the way (a folder uploaded whole): each
    new one's name checked, an existing one never a link."""
    path = root
    for part in parts:
        path = f"{path}/{part}"
        try:
            kind = _kind(sftp.lstat(path).st_mode)
        except FileNotFoundError:
            new_name(part)
            try:
                sftp.mkdir(path)
            except OSError:  # made meanwhile by the folder's other uploads
                if _kind(sftp.lstat(path).st_mode) != "dir":
                    raise
            continue
        if kind != "dir":
            raise BadPath(f"{part} is not a folder" + (" (a link)" if kind == "link" else "") + ".")
    return path


def create_partial(sftp, folder: str, partial: str, name: str, overwrite: bool) -> None:
    """An empty private file for an upload's bytes, beside its target."""
    if not overwrite and _exists(sftp, f"{folder}/{name}"):
        raise Conflict(f"{name} already exists there: confirm to replace it.")
    with sftp.open(f"{folder}/{partial}", "wx") as handle:  # O_EXCL: never an existing one
        handle.chmod(0o600)


def partial_size(sftp, path: str) -> int:
    attrs = sftp.lstat(path)
    if not stat.S_ISREG(attrs.st_mode or 0):
        raise BadPath("The upload's partial file is not a regular file any more.")
    return attrs.st_size or 0


def check_offset(sftp, path: str, offset: int) -> None:
    """A write goes where the partial file ends on the cluster, nowhere else."""
    size = partial_size(sftp, path)
    if size != offset:
        raise Conflict(f"The upload is at byte {size:,}, not {offset:,}: ask for its offset.")


WRITE_SIZE = 96 * 1024  # bytes per SFTP write where the server takes it (write_size)


def write_size(sftp) -> int:
    """How much one SFTP write of an upload carries: WRITE_SIZE where the server says it
    takes that much (limits@openssh.com, OpenSSH 8.6 and later: 255 KiB), else the 32 KiB
    every server takes (a message longer than a server's limit ends the session). Not
    more: paramiko copies what is left of a message for each 32 KiB channel packet it
    sends; 96 KiB took 20 % less of the web worker's CPU than 32 KiB, 255 KiB more."""
    try:
        kind, msg = sftp._request(CMD_EXTENDED, "limits@openssh.com")
    except TimeoutError:
        raise
    except OSError:  # not a server that says (its status: unsupported)
        return 32 * 1024
    if kind != CMD_EXTENDED_REPLY:
        return 32 * 1024
    msg.get_int64()  # the longest message
    msg.get_int64()  # the longest read
    longest = msg.get_int64()  # (0: the server sets no limit)
    return min(WRITE_SIZE, longest) if longest else WRITE_SIZE


def write_at(sftp, path: str, offset: int, pieces) -> int:
    """Append ``pieces`` (an iterable of bytes) at ``offset``, which must be the partial
    file's size on the cluster; each piece written as it arrives, in pipelined writes
    (``write_size``). Returns the new size."""
    check_offset(sftp, path, offset)
    size = offset
    with sftp.open(path, "r+") as handle:
        handle.seek(offset)
        handle.set_pipelined(True)
        handle.MAX_REQUEST_SIZE = write_size(sftp)  # (paramiko's is 32 KiB for every file)
        for piece in pieces:
            handle.write(piece)
            size += len(piece)
    return size


def finish_upload(sftp, partial: str, target: str, overwrite: bool) -> None:
    """The partial file becomes the target, in one rename."""
    if not overwrite and _exists(sftp, target):
        raise Conflict(f"{target.rsplit('/', 1)[-1]} appeared meanwhile: confirm to replace it.")
    sftp.posix_rename(partial, target)


# --- downloads (files/streaming.py) -------------------------------------------------

READ_SIZE = 255 * 1024  # the most OpenSSH's sftp-server answers one read with
READS_AHEAD = 16  # reads in flight: about 4 MiB


class _Answers:
    """Where paramiko hands over the answers to reads sent with it (as to its SFTPFile)."""

    def __init__(self) -> None:
        self.by_number: dict[int, tuple[int, Any]] = {}

    def _async_response(self, kind: int, msg: Any, number: int) -> None:
        self.by_number[number] = (kind, msg)


def read_range(sftp, handle, start: int, end: int, piece: int) -> Iterator[bytes]:
    """The bytes ``start`` to ``end`` (excluded) of an open file, in pieces of at least
    ``piece`` bytes but the last (stopping early if the file is shorter now), read with
    READS_AHEAD reads in flight: a download runs at the link's pace rather than one round
    trip per read, and the web host holds no more than those reads whatever the client's
    pace (paramiko's own prefetch reads the whole file ahead of a slow client). A server
    that answers less than asked is asked for the rest, and smaller reads from then on.
    paramiko's request and answer calls are used as its own SFTPFile uses them."""
    answers, asked = _Answers(), deque()  # type: _Answers, deque[tuple[int, int, int]]
    size, at, held, out = READ_SIZE, start, 0, []  # type: int, int, int, list[bytes]

    def ask(offset: int, length: int, first: bool = False) -> None:
        number = sftp._async_request(answers, CMD_READ, handle.handle, int64(offset), length)
        (asked.appendleft if first else asked.append)((number, offset, length))

    while True:
        while at < end and len(asked) < READS_AHEAD:
            ask(at, min(size, end - at))
            at += min(size, end - at)
        if not asked:
            break
        number, offset, length = asked.popleft()
        while number not in answers.by_number:
            sftp._read_response()  # one answer, handed to its reader
        kind, msg = answers.by_number.pop(number)
        if kind == CMD_STATUS:
            if msg.get_int() == SFTP_EOF:
                break  # shorter now than when the download began
            msg.rewind()
            msg.get_int()  # (the request number, read again)
            sftp._convert_status(msg)  # raises the server's error
        if kind != CMD_DATA:
            raise OSError(f"SFTP answered a read with message type {kind}")
        data = msg.get_string()
        if not data:
            break
        if len(data) < length:  # the server's reads are smaller: ask for the rest first
            size = len(data)
            ask(offset + len(data), length - len(data), first=True)
        out.append(data)
        held += len(data)
        if held >= piece:
            yield b"".join(out)
            out, held = [], 0
    if out:
        yield b"".join(out)
