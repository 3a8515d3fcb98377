"""The pages of what the portal records and tells: every action the audit log records
(identity/audit/models.py: ``AuditEvent.Action``, with the modules that record each) and
every notification event (notifications/events.py: ``Event``, with its defaults)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from reference_text import ROOT, cell, code, django_ready, docstring_md, member_comments, table

# Folders of the repository that hold no portal code (searched for no recorder).
NOT_CODE = {".git", ".venv", "var", "node_modules", "tests", "docs", "bench", "migrations"}


def python_files() -> list[Path]:
    """Every .py file of the portal's own code, in a fixed order."""
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = sorted(d for d in subfolders if d not in NOT_CODE and d[0] != ".")
        found += [Path(folder) / name for name in sorted(files) if name.endswith(".py")]
    return found


def recorders(names: list[str]) -> dict[str, list[str]]:
    """For each ``Action`` member name, the modules that name it (``Action.NAME``),
    relative to the repository."""
    uses: dict[str, list[str]] = {name: [] for name in names}
    pattern = re.compile(r"\bAction\.([A-Z][A-Z0-9_]*)\b")
    for path in python_files():
        if path.match("identity/audit/models.py"):
            continue
        for name in sorted(set(pattern.findall(path.read_text(errors="replace")))):
            if name in uses:
                uses[name].append(str(path.relative_to(ROOT)))
    return uses


def audit_page() -> str:
    django_ready()
    import identity.audit
    from identity.audit.models import AuditEvent

    Action = AuditEvent.Action
    notes = member_comments(Action)
    uses = recorders([action.name for action in Action])
    out = [
        "# Audit actions",
        "",
        "Every action the audit log records (`AuditEvent.Action`) and the modules that record",
        "it, generated at each build from `identity/audit/models.py`; what a row holds is said",
        "by `identity/audit/__init__.py`, below.",
        "",
        "## Actions",
    ]
    rows: list[list[str]] = []
    for action in Action:
        above, beside = notes.get(action.name, ("", ""))
        if above:  # a comment above a member heads the group of those after it
            out += ["", *table(["Action", "Meaning", "Recorded in"], rows)] if rows else []
            out += ["", cell(above)]
            rows = []
        where = ", ".join(code(path) for path in uses[action.name])
        label = cell(action.label) + (f" ({cell(beside)})" if beside else "")
        rows.append([code(action.value), label, where])
    out += ["", *table(["Action", "Meaning", "Recorded in"], rows), ""]
    out += [
        "## Outcomes",
        "",
        "A row's outcome is one of " + ", ".join(code(value) for value in AuditEvent.Outcome) + ".",
        "",
        "## What is recorded",
        "",
        # Its first paragraph is about the module itself.
        docstring_md(identity.audit.__doc__).split("\n\n", 1)[-1],
    ]
    return "\n".join(out) + "\n"


def events_page() -> str:
    django_ready()
    from notifications import events

    notes = member_comments(events.Event)
    rows = []
    for event in events.Event:
        above, beside = notes.get(event.name, ("", ""))
        chosen = event not in events.NOT_CHOSEN
        defaults = [
            ("on" if events.default(event, channel) else "off") if chosen else "—"
            for channel in events.Channel
        ]
        note = " ".join(part for part in (above, beside) if part)
        rows.append([code(event.value), cell(event.label), "yes" if chosen else "no"])
        rows[-1] += defaults + [cell(note)]
    channels = [f"Default: {cell(channel.label.lower())}" for channel in events.Channel]
    out = [
        "# Notification events",
        "",
        "Every event the portal can tell a person of, whether it is theirs to choose and, if",
        "so, on which channels it is on until they change it; generated at each build from",
        "`notifications/events.py` (`Event`, `NOT_CHOSEN`, `default()`).",
        "",
        *table(["Event", "What happened", "A choice"] + channels + ["Note"], rows),
        "",
        f"The channels: {', '.join(f'{code(c.value)} ({cell(c.label)})' for c in events.Channel)}.",
    ]
    return "\n".join(out) + "\n"
