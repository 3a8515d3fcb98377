"""An uploaded archive (``.tar``, ``.tar.gz``, ``.zip``) unpacked into a folder of the
portal's, bounded before anything is written: at most PORTAL_IMPORT_MAX_FILES members,
none larger than PORTAL_IMPORT_MAX_FILE_BYTES, all together at most four times the
largest upload; names inside the folder only (tarfile's ``data`` filter, zipfile's own
name cleaning); links and devices become nothing (tree.py would refuse them anyway)."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

from django.conf import settings

from tracking.imports.source import Unreadable


def _bounds() -> tuple[int, int, int]:
    return (
        settings.PORTAL_IMPORT_MAX_FILES,
        settings.PORTAL_IMPORT_MAX_FILE_BYTES,
        4 * settings.PORTAL_IMPORT_MAX_UPLOAD_BYTES,
    )


def _check(count: int, size: int, total: int, name: str) -> None:
    most_files, most_bytes, most_total = _bounds()
    if count > most_files:
        raise Unreadable(f"The archive holds more than {most_files:,} files.")
    if size > most_bytes:
        raise Unreadable(
            f"{name[:200]} is {size / 1e9:.1f} GB unpacked, more than the "
            f"{most_bytes / 1e9:.2f} GB an imported file may be."
        )
    if total > most_total:
        raise Unreadable(f"The archive unpacks to more than {most_total / 1e9:.1f} GB.")


def unpack(archive: Path, into: Path) -> None:
    """``archive`` into the folder ``into``, or Unreadable saying why not."""
    if zipfile.is_zipfile(archive):
        _unzip(archive, into)
        return
    try:
        with tarfile.open(archive) as tar:
            members, total = [], 0
            for member in tar:  # headers only: nothing is unpacked before all are checked
                if not (member.isfile() or member.isdir()):
                    continue
                total += member.size
                members.append(member)
                _check(len(members), member.size, total, member.name)
            tar.extractall(into, members=members, filter="data")
    except tarfile.TarError as exc:
        raise Unreadable(
            f"The upload is not a tar or zip archive, or is cut short ({exc})."
        ) from None
    except (OSError, EOFError) as exc:
        raise Unreadable(f"The archive cannot be unpacked: {exc}") from None


def _unzip(archive: Path, into: Path) -> None:
    try:
        with zipfile.ZipFile(archive) as zipped:
            infos = [i for i in zipped.infolist() if not _is_link(i)]
            total = 0
            for n, info in enumerate(infos, 1):
                total += info.file_size
                _check(n, info.file_size, total, info.filename)
            for info in infos:
                # zipfile reads at most the declared size: the checks above bound it.
                zipped.extract(info, into)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
        raise Unreadable(f"The zip archive cannot be unpacked: {exc}") from None


def _is_link(info: zipfile.ZipInfo) -> bool:
    return (info.external_attr >> 16) & 0o170000 == 0o120000
