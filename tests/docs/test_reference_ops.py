"""The generated pages of Prometheus metrics and management commands
(docs/_ext/reference_ops.py) list every metric /metrics exports and every manage.py
command of the portal's own apps, compared with the code."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import reference_ops  # noqa: E402

from common import prometheus  # noqa: E402
from endpoints.metrics import EndpointCollector  # noqa: E402
from ops.queues import QueueCollector  # noqa: E402


def exported(registry) -> dict[str, tuple[str, str]]:
    """{name: (type, help)} of the portal's metrics in the exposition of ``registry``."""
    text = generate_latest(registry).decode()
    helps = dict(re.findall(r"^# HELP (portal_\w+) (.*)$", text, re.M))
    types = dict(re.findall(r"^# TYPE (portal_\w+) (\w+)$", text, re.M))
    found = {name: (types[name], helps[name].replace("\\\\", "\\")) for name in types}
    # A process of its own (no multiprocess mode) also says when each series was created.
    return {
        name: value
        for name, value in found.items()
        if not (
            name.endswith("_created")
            and {name[: -len("_created")], name[: -len("_created")] + "_total"} & set(found)
        )
    }


def test_every_metric_is_on_the_page_with_its_type_help_and_labels():
    page = reference_ops.prometheus_page()
    rows = re.findall(r"^\| `(portal_\w+)` \| (\w+) \| ([^|]*) \| (.*?) \| [^|]*\|$", page, re.M)
    listed = {name: (kind, labels, help_) for name, kind, labels, help_ in rows}
    # What this process exports (every module that defines one is imported by now) and
    # what the broker's collector makes at a scrape.
    queues = CollectorRegistry(auto_describe=False)
    collector = QueueCollector()
    collector._read = lambda: iter(())
    queues.register(collector)
    endpoints = EndpointCollector()
    endpoints._read = lambda: iter(())
    queues.register(endpoints)
    expected = exported(REGISTRY) | exported(queues)
    assert len(expected) > 20 and set(listed) == set(expected) and len(rows) == len(listed)
    for name, (kind, help_) in expected.items():
        assert listed[name][0] == kind and listed[name][2] == help_.replace("|", "\\|"), name
    for metric in vars(prometheus).values():
        if hasattr(metric, "_labelnames") and hasattr(metric, "_type"):
            name = metric._name + ("_total" if metric._type == "counter" else "")
            assert re.findall(r"`(\w+)`", listed[name][1]) == list(metric._labelnames), name


def test_every_command_of_the_portals_apps_is_on_the_page():
    from django.core.management import get_commands, load_command_class

    page = reference_ops.commands_page()
    sections = dict(re.findall(r"^## (\w+)\n\n(.*?)(?=^## |\Z)", page, re.M | re.S))
    own = {
        path.stem: path.parts[-4]
        for path in ROOT.glob("*/management/commands/*.py")
        if not path.name.startswith("_")
    }
    assert len(own) > 10 and set(sections) == set(own)
    for name, app in own.items():
        assert get_commands()[name] == app, name  # not shadowed by another app's
        command = load_command_class(app, name)
        body = sections[name]
        assert " ".join(str(command.help).split()) in body, name
        assert ("*Development only*" in body) == (app == "devtools"), name
        for action in command.create_parser("manage.py", name)._actions:
            for option in action.option_strings:
                if option.startswith("--") and option not in {
                    "--help",
                    "--version",
                    "--verbosity",
                    "--settings",
                    "--pythonpath",
                    "--traceback",
                    "--no-color",
                    "--force-color",
                    "--skip-checks",
                }:
                    assert f"`{option}" in body or f", {option}" in body, (name, option)
