"""Slurm's compressed host lists ("node[1-3,7],gpu-a01") as names, one each. Pure."""

from __future__ import annotations

import re

# A bracket range expands to at most this many names: the list is data written by the
# scheduler, and a job's own page never needs more.
MAX_NAMES = 4096
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?\Z")


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in (p.strip() for p in parts) if p]


def _expand_one(item: str, budget: int) -> list[str]:
    open_at = item.find("[")
    if open_at < 0:
        return [item]
    close_at = item.find("]", open_at)
    if close_at < 0:
        return [item]  # not a range: keep it as written
    prefix, body, rest = item[:open_at], item[open_at + 1 : close_at], item[close_at + 1 :]
    tails = _expand_one(rest, budget) if rest else [""]
    names: list[str] = []
    for piece in body.split(","):
        match = _RANGE.match(piece.strip())
        if not match:
            return [item]
        lo_text, hi_text = match.group(1), match.group(2) or match.group(1)
        lo, hi = int(lo_text), int(hi_text)
        if hi < lo:
            return [item]
        for n in range(lo, hi + 1):
            for tail in tails:
                if len(names) >= budget:
                    return names
                names.append(f"{prefix}{n:0{len(lo_text)}d}{tail}")
    return names


def expand_hostlist(text: str) -> list[str]:
    """``"node[1-2],gpu07"`` -> ``["node1", "node2", "gpu07"]`` (zero padding kept);
    anything that is not a well-formed range stays one name, as written."""
    names: list[str] = []
    for item in _split_top(text or ""):
        names.extend(_expand_one(item, MAX_NAMES - len(names)))
        if len(names) >= MAX_NAMES:
            break
    return names
