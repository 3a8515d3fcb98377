"""Text a job wrote (its stderr, a check's output), made safe to keep and show: control
characters and terminal escapes removed, bounded in lines and characters."""

from __future__ import annotations

import re

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
