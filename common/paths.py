"""Paths a person types or a page sends, checked before anything reaches a cluster.

A path is relative to one of the person's roots (projects/roots.py) and made of plain
names: never ``..``, never absolute, no NUL, at most ``MAX_DEPTH`` names and ``MAX_PATH``
bytes (a 10,000-deep path is refused here, not walked). A *new* name (a folder made, a
rename, an upload) must also be printable: no control characters (a newline or an escape
sequence in a name would fool listings and terminals), no '/'. Names already on the
cluster may be anything; they are shown escaped (``shown``).
"""

from __future__ import annotations

import unicodedata

MAX_DEPTH = 64
MAX_PATH = 4096
MAX_NAME = 255  # bytes, as most file systems


class BadPath(ValueError):
    """Not a path inside the root, or not a name the portal makes."""


def parts_of(rel: str) -> list[str]:
    """'a/b/' -> ['a', 'b']; BadPath for anything that could leave the root."""
    rel = rel or ""
    if len(rel.encode(errors="surrogateescape")) > MAX_PATH:
        raise BadPath("That path is too long.")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if len(parts) > MAX_DEPTH:
        raise BadPath(f"That path is deeper than {MAX_DEPTH} folders.")
    for part in parts:
        if part == ".." or "\x00" in part:
            raise BadPath("Not a path inside this folder.")
        if len(part.encode(errors="surrogateescape")) > MAX_NAME:
            raise BadPath("A name in that path is too long.")
    return parts


def joined(parts: list[str]) -> str:
    return "/".join(parts)


def new_name(name: str) -> str:
    """A name the portal may create: printable, one component, not '.' or '..'."""
    name = (name or "").strip()
    if not name or name in (".", ".."):
        raise BadPath("Give a name.")
    if "/" in name or "\x00" in name:
        raise BadPath("A name cannot contain '/'.")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in name):
        raise BadPath("A name cannot contain control characters (newlines, escapes, tabs).")
    if len(name.encode()) > MAX_NAME:
        raise BadPath(f"A name is at most {MAX_NAME} bytes.")
    return name


def shown(name: str, limit: int = 200) -> str:
    """A name from the cluster as text safe to show: control characters as escapes
    (``\\n``, ``\\x1b``), cut to ``limit`` characters."""
    out = []
    for c in name:
        if c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp"):
            out.append(f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}")
        else:
            out.append(c)
    text = "".join(out)
    return text if len(text) <= limit else text[: limit - 1] + "…"
