"""Text a job wrote (its stderr, a check's output), made safe to keep and show: control
characters and terminal escapes removed, bounded in lines and characters; and values a
user sent, quoted and cut for a message (quoted())."""

from __future__ import annotations

import re
import reprlib

_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain_line(line: str) -> str:
    """One line of program output as plain text: what a terminal would finally show after
    carriage returns (progress bars), without escape sequences or control characters."""
    line = line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r")
    return _CONTROL.sub("", _ANSI.sub("", line))


def error_tail(text: str, max_lines: int = 20, max_chars: int = 2000) -> str:
    """The last lines of a failed job's stderr, as plain text of at most ``max_lines``
    lines and ``max_chars`` characters (a line longer than that keeps its end)."""
    lines = [plain_line(line) for line in text.split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    kept: list[str] = []
    used = 0
    for line in reversed(lines[-max_lines:]):
        room = max_chars - used
        if room <= 0:
            break
        if len(line) > room:
            line = "…" + line[-(room - 1) :] if room > 1 else "…"
        kept.append(line)
        used += len(line) + 1
    return "\n".join(reversed(kept))


class _Short(reprlib.Repr):
    def repr_int(self, x, level):
        if x.bit_length() > 128:  # repr() of a 5,000-digit int raises (and costs)
            return f"<a number of about {int(x.bit_length() * 0.30103)} digits>"
        return super().repr_int(x, level)


def quoted(value: object, limit: int = 60) -> str:
    """A value someone sent, for a message: quoted as repr() quotes it, cut to at most
    ``limit`` characters (lists and mappings two levels deep, a few items each), so that
    an error never echoes a whole document back, however large or deep it is."""
    short = _Short()
    short.maxlevel = 2
    short.maxlist = short.maxtuple = short.maxset = short.maxdict = 4
    short.maxstring = short.maxother = short.maxlong = max(limit, 8)
    text = short.repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(value: object) -> str:
    """A CSV cell a spreadsheet shows as text, never runs as a formula: text that starts
    like one gets a leading quote; numbers (``-1.5``) and dates stay as they are."""
    if value is None:
        return ""
    text = value.isoformat() if hasattr(value, "isoformat") else str(value)
    if text.startswith(FORMULA_START) and not _numeric(text):
        return "'" + text
    return text


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
