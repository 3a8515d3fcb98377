"""The generated pages of audit actions and notification events
(docs/_ext/reference_records.py) list every ``AuditEvent.Action`` with the modules that
record it and every notification ``Event`` with its defaults, compared with the code."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import reference_records  # noqa: E402

from identity.audit.models import AuditEvent  # noqa: E402
from notifications import events  # noqa: E402


def test_every_audit_action_is_on_the_page_with_where_it_is_recorded():
    page = reference_records.audit_page()
    rows = re.findall(r"^\| `([a-z_]+)` \| (.+) \| (.*) \|$", page, re.M)
    assert len(AuditEvent.Action) > 30 and len(rows) == len(AuditEvent.Action)
    assert {value for value, _, _ in rows} == set(AuditEvent.Action.values)
    for value, _, where in rows:
        name = AuditEvent.Action(value).name
        modules = re.findall(r"`([^`]+\.py)`", where)
        assert modules, f"{value}: no module records it"
        for module in modules:
            assert re.search(rf"\bAction\.{name}\b", (ROOT / module).read_text()), module
    for outcome in AuditEvent.Outcome.values:
        assert f"`{outcome}`" in page.split("## Outcomes", 1)[1]


def test_every_module_that_names_an_action_is_on_the_page():
    page = reference_records.audit_page()
    for path in reference_records.python_files():
        if path.match("identity/audit/models.py"):
            continue
        for name in set(re.findall(r"\bAction\.([A-Z][A-Z0-9_]*)\b", path.read_text())):
            if name in AuditEvent.Action.names:
                value = AuditEvent.Action[name].value
                row = re.search(rf"^\| `{value}` \|.*$", page, re.M)
                assert row and f"`{path.relative_to(ROOT)}`" in row.group(0), (name, path)


def test_every_notification_event_is_on_the_page_with_its_defaults():
    page = reference_records.events_page()
    channels = list(events.Channel)
    rows = re.findall(r"^\| `([a-z_]+)` \| ([^|]+) \| (yes|no) \| (.*) \|$", page, re.M)
    assert len(events.Event) > 10 and {event for event, *_ in rows} == set(events.Event.values)
    for value, label, chosen, rest in rows:
        event = events.Event(value)
        assert label.strip() == event.label
        assert (chosen == "yes") == (event not in events.NOT_CHOSEN), value
        defaults = [cell.strip() for cell in rest.split(" | ")[: len(channels)]]
        if event in events.NOT_CHOSEN:
            assert defaults == ["—"] * len(channels), value
        else:
            expected = ["on" if events.default(event, c) else "off" for c in channels]
            assert defaults == expected, value
