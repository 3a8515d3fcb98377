"""The operator's pages: every Prometheus metric the portal exports (the metric objects of
common/prometheus.py, as prometheus_client holds them, and those ops/queues.py's collector
makes) and every ``manage.py`` command of the portal's own apps (Django's
``get_commands()``, each command's class and parser)."""

from __future__ import annotations

import argparse
from pathlib import Path

from reference_text import ROOT, cell, code, django_ready, table

# What a metric of each type is exported as: its name with these endings.
SERIES = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}


Metric = tuple[str, str, str, tuple[str, ...], str]  # name, type, help, labels, notes


def metrics() -> list[Metric]:
    """Every metric object in common/prometheus.py, in its order; the name as exported (a
    counter's with ``_total``). Importing it sets nothing: no multiprocess directory is
    chosen here."""
    from prometheus_client.metrics import MetricWrapperBase

    from common import prometheus

    found = []
    for value in vars(prometheus).values():
        if not isinstance(value, MetricWrapperBase):
            continue
        kind = value._type
        name = value._name + ("_total" if kind == "counter" else "")
        notes = []
        if kind == "histogram":
            notes.append("buckets " + ", ".join(f"{bound:g}" for bound in value._upper_bounds))
        mode = getattr(value, "_multiprocess_mode", "")
        if kind == "gauge" and mode:
            notes.append(f"multiprocess mode {mode}")
        found.append((name, kind, value._documentation, tuple(value._labelnames), "; ".join(notes)))
    return found


def queue_metrics() -> list[Metric]:
    """The metrics ops/queues.py's collector makes at each scrape, from the broker: asked
    here with no broker (its reading replaced by one that finds no queue)."""
    django_ready()
    from ops.queues import QueueCollector

    collector = QueueCollector()
    collector._read = lambda: iter(())  # type: ignore[method-assign]
    return [
        (family.name, family.type, family.documentation, tuple(family._labelnames), "")
        for family in collector.collect()
    ]


def endpoint_metrics() -> list[Metric]:
    """The metrics endpoints/metrics.py's collector makes at each scrape, from the
    database: asked here with none (its reading replaced by one that finds no endpoint)."""
    django_ready()
    from endpoints.metrics import EndpointCollector

    collector = EndpointCollector()
    collector._read = lambda: iter(())  # type: ignore[method-assign]
    return [
        (family.name, family.type, family.documentation, tuple(family._labelnames), "")
        for family in collector.collect()
    ]


def _metrics_table(found: list[Metric]) -> list[str]:
    return table(
        ["Metric", "Type", "Labels", "Help", "Notes"],
        [
            [code(name), kind, ", ".join(code(label) for label in labels), cell(doc), notes]
            for name, kind, doc, labels, notes in found
        ],
    )


def prometheus_page() -> str:
    from common import prometheus
    from endpoints import metrics as endpoint_metrics_module
    from ops import queues

    about = (prometheus.__doc__ or "").strip().split("\n\n")[1:]
    out = [
        "# Prometheus metrics",
        "",
        "Every metric the portal exports at `/metrics`, with its type, labels and help,",
        "generated at each build from the metric objects of `common/prometheus.py` and the",
        "collectors of `ops/queues.py` and `endpoints/metrics.py`.",
        "",
        "## The portal's processes",
        "",
        "Defined in `common/prometheus.py`; a histogram is exported as its name with",
        "`_bucket`, `_sum` and `_count`.",
        "",
        *_metrics_table(metrics()),
        "",
        "The `command` label is one of "
        + ", ".join(code(name) for name in sorted(prometheus.COMMANDS))
        + ", one of the portal's own scripts, or `other`.",
        "",
        *(paragraph.replace("\n", " ") + "\n" for paragraph in about),
        "## The broker's queues",
        "",
        "From `ops/queues.py`: "
        + cell(" ".join((queues.__doc__ or "").split()).split(". ")[0])
        + ".",
        "",
        *_metrics_table(queue_metrics()),
        "",
        "## Model endpoints",
        "",
        "From `endpoints/metrics.py`: "
        + cell(" ".join((endpoint_metrics_module.__doc__ or "").split()).split(". ")[0])
        + ". Each endpoint is labelled by its name, its owner and its kind.",
        "",
        *_metrics_table(endpoint_metrics()),
    ]
    return "\n".join(out).rstrip() + "\n"


# --- management commands -------------------------------------------------------------------


def own_commands() -> list[tuple[str, str]]:
    """(command, app) of every manage.py command of an app in this repository (not
    Django's, not a third party's), by name."""
    django_ready()
    from django.apps import apps
    from django.core.management import get_commands

    own = {
        config.name
        for config in apps.get_app_configs()
        if Path(config.path).resolve().is_relative_to(ROOT)
        and not Path(config.path).resolve().is_relative_to(ROOT / ".venv")
    }
    return sorted((name, app) for name, app in get_commands().items() if app in own)


def command_options(name: str, app: str) -> tuple[str, list[tuple[str, str]]]:
    """(help, [(argument, help)]) of a command: its own arguments only, not the options
    every Django command has (--verbosity, --settings ...)."""
    from django.core.management import load_command_class
    from django.core.management.base import BaseCommand

    command = load_command_class(app, name)
    common = {action.dest for action in BaseCommand().create_parser("manage.py", "base")._actions}
    parser = command.create_parser("manage.py", name)
    formatter = argparse.HelpFormatter("manage.py")
    found = []
    for action in parser._actions:
        if action.dest in common:
            continue
        text = formatter._expand_help(action) if action.help else ""
        found.append((formatter._format_action_invocation(action), text))
    return str(command.help or ""), found


def commands_page() -> str:
    found = [(name, app, *command_options(name, app)) for name, app in own_commands()]
    out = [
        "# Management commands",
        "",
        "Every `manage.py` command of the portal's own apps, with its help and arguments,",
        "generated at each build from the commands themselves (Django's `get_commands()`).",
        "Those of `devtools` are for development only.",
        "",
        *table(
            ["Command", "App", "What it does"],
            [
                [f"[`{name}`](#{name.replace('_', '-')})", app + _dev(app), cell(text)]
                for name, app, text, _ in found
            ],
        ),
    ]
    for name, app, text, arguments in found:
        out += ["", f"## {name}", ""]
        if app == "devtools":
            out += ["*Development only* (`devtools`).", ""]
        out += [cell(text)]
        if arguments:
            out += ["", *table(["Argument", "Meaning"], [[code(a), cell(h)] for a, h in arguments])]
    return "\n".join(out) + "\n"


def _dev(app: str) -> str:
    return " (development only)" if app == "devtools" else ""
