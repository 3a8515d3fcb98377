"""Reference pages generated from the code at each build, so they cannot drift: every
setting an operator sets (portal/settings/configured.py, with the comment above it), every
`portal` subcommand (the CLI's own parser) and every REST API operation (the OpenAPI
schema drf-spectacular makes); and, from the modules beside this one, the job states and
the schedulers' state maps (reference_states), the audit actions and notification events
(reference_records), the Prometheus metrics and management commands (reference_ops) and
the in-job metrics client (reference_client). Written into docs/reference/generated/ (not
kept in git); this module is the Sphinx extension (``setup``, ``write_all``)."""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "reference" / "generated"
ENV_CALL = re.compile(r"env_[a-z]+")


# --- settings ------------------------------------------------------------------------------


def settings_rows(source: str) -> list[tuple[str, str, str, str, str]]:
    """(section, name, kind, default, meaning) of every env_*("NAME", ...) read in
    ``source`` (configured.py), in its order; the meaning is the comment block above the
    statement that reads it."""
    lines = source.splitlines()
    tree = ast.parse(source)
    section = ""
    sections = {
        number: match.group(1).strip()
        for number, line in enumerate(lines, 1)
        if (match := re.match(r"# --- (.+?) -+\s*$", line))
    }
    rows = []
    seen: set[str] = set()
    for statement in tree.body:
        for number in sorted(sections):
            if number < statement.lineno:
                section = sections[number]
        for node in ast.walk(statement):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and ENV_CALL.fullmatch(node.func.id)
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                continue
            name = node.args[0].value
            if name in seen:
                continue
            seen.add(name)
            default = ast.unparse(node.args[1]) if len(node.args) > 1 else ""
            if node.func.id == "env_secret":
                default = "" if default in ("", "None") else default
            rows.append(
                (section, name, node.func.id[4:], default, _comment_above(lines, statement))
            )
    return rows


def _comment_above(lines: list[str], statement: ast.stmt) -> str:
    found = []
    number = statement.lineno - 2
    while number >= 0 and lines[number].startswith("#") and not lines[number].startswith("# ---"):
        found.append(lines[number].lstrip("# ").rstrip())
        number -= 1
    return " ".join(reversed(found))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_page() -> str:
    folder = ROOT / "portal" / "settings"
    rows = settings_rows((folder / "configured.py").read_text()) + [
        ("Development and tests (dev.py)", *row[1:])
        for row in settings_rows((folder / "dev.py").read_text())
    ]
    out = [
        "# Settings",
        "",
        "Every setting an operator sets, read from the environment at start-up, with its",
        "default and meaning, as `portal/settings/configured.py` (and, for development and",
        "tests, `dev.py`) declare them (generated at each build). A setting ending in `_FILE` is read from that file instead (secrets).",
        "",
    ]
    section = None
    for where, name, kind, default, meaning in rows:
        if where != section:
            section = where
            out += ["", f"## {where or 'General'}", "", "| Setting | Kind | Default | Meaning |"]
            out.append("|---|---|---|---|")
        shown = f"`{_cell(default)}`" if default else ""
        out.append(f"| `{name}` | {kind} | {shown} | {_cell(meaning)} |")
    return "\n".join(out) + "\n"


# --- the portal CLI --------------------------------------------------------------------------


def cli_commands(parser: argparse.ArgumentParser, prefix: str = "portal") -> list[tuple[str, str]]:
    """(command line, help) of every subcommand, depth first."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                line = f"{prefix} {name}"
                found.append((line, helps.get(name) or sub.description or ""))
                found += cli_commands(sub, line)
    return found


def cli_page() -> str:
    sys.path.insert(0, str(ROOT / "client"))
    from portal_client.cli import build_parser

    parser = build_parser()
    out = [
        "# The `portal` command",
        "",
        "Every subcommand, from the command's own parser (generated at each build);",
        "`portal COMMAND --help` says the rest.",
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
    ]
    for line, text in cli_commands(parser):
        sub = _subparser(parser, line.split()[1:])
        out += [f"## `{line}`", "", text or "", "", "```text", sub.format_help().strip(), "```", ""]
    return "\n".join(out)


def _subparser(parser: argparse.ArgumentParser, words: list[str]) -> argparse.ArgumentParser:
    for word in words:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[word]
    return parser


# --- the REST API -----------------------------------------------------------------------------


def api_operations() -> list[tuple[str, str, str, str]]:
    """(path, method, operation id, summary) of every /api/v1/ operation in the schema."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ.setdefault("PORTAL_DEMO", "1")
    import django

    django.setup()
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    found = []
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                summary = (
                    operation.get("summary") or operation.get("description", "").split("\n")[0]
                )
                found.append((path, method.upper(), operation["operationId"], summary))
    return found


def api_page() -> str:
    out = [
        "# The REST API",
        "",
        "Every operation of `/api/v1/`, from the OpenAPI schema the portal serves at",
        "`/api/schema/` (generated at each build; `/api/docs/` is its interactive form).",
        "",
        "| Method | Path | Operation | Summary |",
        "|---|---|---|---|",
    ]
    for path, method, operation, summary in api_operations():
        out.append(f"| {method} | `{_cell(path)}` | `{operation}` | {_cell(summary)} |")
    return "\n".join(out) + "\n"


def floors_figure() -> str:
    """The house's floors, drawn from the import contract (as the README's map)."""
    from devtools import floors

    return floors.figure() + "\n"


def write_all(app=None) -> None:
    # The other pages, each from its own module beside this one.
    import reference_client
    import reference_ops
    import reference_records
    import reference_states

    OUT.mkdir(parents=True, exist_ok=True)
    pages = {
        "settings.md": settings_page(),
        "cli.md": cli_page(),
        "api.md": api_page(),
        "floors.txt": floors_figure(),
        "job-states.md": reference_states.states_page(),
        "audit-actions.md": reference_records.audit_page(),
        "notification-events.md": reference_records.events_page(),
        "prometheus-metrics.md": reference_ops.prometheus_page(),
        "management-commands.md": reference_ops.commands_page(),
        "portal-metrics.md": reference_client.client_page(),
    }
    for name, text in pages.items():
        target = OUT / name
        if not target.exists() or target.read_text() != text:  # (unchanged: not rebuilt)
            target.write_text(text)


def setup(app):
    app.connect("builder-inited", write_all)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
