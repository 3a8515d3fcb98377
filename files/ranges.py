"""HTTP range requests (RFC 9110 §14) for downloads that resume: ``curl -C -`` sends
``Range: bytes=<offset>-``. One range is served (206); several, or a range that is not
``bytes``, are ignored (the whole file, 200), as the RFC allows; a range that starts past
the end is a 416. Pure: tested on the headers curl and browsers send."""

from __future__ import annotations

import re

RANGE = re.compile(r"bytes=(\d{0,19})-(\d{0,19})\Z")


class Unsatisfiable(ValueError):
    """The range starts past the end of the file (416)."""


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(first, last) inclusive for one satisfiable range, None to send everything."""
    if not header:
        return None
    found = RANGE.match(header.strip().replace(" ", ""))
    if not found or (not found[1] and not found[2]):
        return None
    first, last = found[1], found[2]
    if not first:  # bytes=-N: the last N bytes
        suffix = int(last)
        if suffix == 0:
            raise Unsatisfiable(header)
        return max(0, size - suffix), size - 1
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if start >= size or (last and int(last) < start):
        if last and int(last) < start:
            return None  # invalid: ignore it
        raise Unsatisfiable(header)
    return start, end


def etag(size: int, mtime: float) -> str:
    """A validator for If-Range: the file's size and modification time."""
    return f'"{size:x}-{int(mtime * 1000):x}"'


def still_valid(if_range: str | None, current: str) -> bool:
    """Whether a Range may be served: no If-Range, or it names this version."""
    return not if_range or if_range.strip() == current
