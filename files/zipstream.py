"""A folder on a cluster as a zip streamed while it is read: nothing of it is kept on the
web host but the chunk in flight (zipfile writes to a sink the response drains; sizes and
CRCs go in data descriptors). What goes in is listed first, bounded in entries and bytes:
regular files only (links and FIFOs are left out, never followed)."""

from __future__ import annotations

import io
import stat
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from common.paths import BadPath

MAX_ENTRIES = 100_000


@dataclass(frozen=True)
class Member:
    name: str  # inside the zip: relative, '/'-separated
    path: str  # on the cluster
    size: int
    mtime: float


def zip_name(name: str) -> str:
    """A member's name as no unzip can take for a path elsewhere: a file named ``..\\x``
    on the cluster is one name there, but Windows' tools (and some others) split at a
    backslash, so it becomes ``_``; a colon (``C:``, an NTFS stream) likewise."""
    return "/".join(part.replace("\\", "_").replace(":", "_") for part in name.split("/"))


def members(sftp, top: str, max_bytes: int) -> list[Member]:
    """The regular files under ``top`` (depth first, by name), links never followed."""
    found: list[Member] = []
    total = 0
    pending = [("", top)]
    while pending:
        prefix, folder = pending.pop()
        children = []
        for attrs in sftp.listdir_iter(folder, read_aheads=64):
            children.append(attrs)
            if len(found) + len(children) > MAX_ENTRIES:
                raise BadPath(f"More than {MAX_ENTRIES:,} entries: copy it with rsync instead.")
        for attrs in sorted(children, key=lambda a: a.filename, reverse=True):
            mode = attrs.st_mode or 0
            name = f"{prefix}{attrs.filename}"
            if stat.S_ISDIR(mode):
                pending.append((f"{name}/", f"{folder}/{attrs.filename}"))
            elif stat.S_ISREG(mode):
                total += attrs.st_size or 0
                if total > max_bytes:
                    raise BadPath(
                        f"More than {max_bytes:,} bytes in all (PORTAL_DOWNLOAD_MAX_BYTES): "
                        "copy it with rsync instead."
                    )
                found.append(
                    Member(
                        name, f"{folder}/{attrs.filename}", attrs.st_size or 0, attrs.st_mtime or 0
                    )
                )
    return found


class _Sink(io.RawIOBase):
    """Where zipfile writes; the response takes what was written after each step."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.position = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.parts.append(bytes(data))
        self.position += len(data)
        return len(data)

    def tell(self) -> int:
        return self.position

    def take(self) -> bytes:
        data, self.parts = b"".join(self.parts), []
        return data


def stream(
    entries: list[Member], read: Callable[[str, int, int], bytes], chunk: int
) -> Iterator[bytes]:
    """The zip of ``entries``; ``read(path, offset, n)`` reads a file's bytes."""
    sink = _Sink()
    archive = zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1)
    for member in entries:
        stamp = datetime.fromtimestamp(max(member.mtime, 315532800)).timetuple()[:6]
        info = zipfile.ZipInfo(zip_name(member.name), date_time=stamp)
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w", force_zip64=member.size >= 2**31) as out:
            at = 0
            while at < member.size:
                data = read(member.path, at, min(chunk, member.size - at))
                if not data:
                    break  # shorter now than when it was listed
                out.write(data)
                at += len(data)
                if sink.parts:
                    yield sink.take()
        yield sink.take()
    archive.close()
    yield sink.take()
