"""How Slurm's ``--json`` answers are read, field by field, for every parser of this
package (squeue and sacct in parsers.py, sinfo in sinfo.py, runs in attempts.py): a
document that is not what it should be is Unparsable; a field of the wrong type reads as
unset, never as another field."""

from __future__ import annotations

import json
from datetime import UTC, datetime


class Unparsable(ValueError):
    """The command's output as a whole is not what it should be (not one bad job)."""


def _none_if_null(value: str) -> str:
    value = value.strip()
    return "" if value in {"(null)", "None", "N/A", "n/a"} else value


def _number(value) -> int | None:
    """A JSON number as Slurm writes it: a plain integer (22.05) or, from 23.02 on,
    ``{"set": true, "infinite": false, "number": N}``. None when unset or not a number."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _epoch(value) -> datetime | None:
    seconds = _number(value)
    if not seconds or seconds <= 0:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _json_state(value) -> str:
    """'RUNNING' (22.05) or ['RUNNING', 'COMPLETING'] (23.02 on): the base state first."""
    if isinstance(value, list):
        value = value[0] if value and isinstance(value[0], str) else ""
    return _text(value)


def _load(output: str, command: str, key: str = "jobs") -> list:
    """The ``jobs`` (or ``nodes``) list of a ``--json`` answer. Slurm escapes every string
    it writes, so a job's name or comment cannot change the structure; a damaged document
    is Unparsable."""
    try:
        document = json.loads(output)
    except (ValueError, RecursionError) as exc:
        raise Unparsable(f"{command} --json printed no JSON document: {exc}") from None
    entries = document.get(key) if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise Unparsable(f"{command} --json printed no list of {key}")
    return entries
