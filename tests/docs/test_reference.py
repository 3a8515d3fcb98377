"""The generated reference (docs/_ext/portal_reference.py) lists every setting the
settings modules read, every `portal` subcommand and every /api/v1/ operation, compared
with the code itself."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import portal_reference  # noqa: E402


def read_settings() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "portal" / "settings").glob("*.py"):
        found |= set(re.findall(r'\benv_[a-z]+\(\s*"([A-Z][A-Z0-9_]*)"', path.read_text()))
    return found


def test_every_setting_read_is_in_the_reference():
    page = portal_reference.settings_page()
    listed = set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", page, re.M))
    assert len(listed) > 150
    assert read_settings() - listed == set()
    assert listed - read_settings() == set()


def test_a_settings_meaning_is_the_comment_above_it():
    rows = portal_reference.settings_rows(
        '# --- Things ---\n# Why it is.\n# More.\nX = env_int("PORTAL_X", 3)\nY = 1\n'
    )
    assert rows == [("Things", "PORTAL_X", "int", "3", "Why it is. More.")]


def test_every_portal_subcommand_is_in_the_reference():
    sys.path.insert(0, str(ROOT / "client"))
    from portal_client import commands
    from portal_client.cli import build_parser

    page = portal_reference.cli_page()
    listed = set(re.findall(r"^## `portal ([a-z-]+)`$", page, re.M))
    table = {name for names in commands.COMMANDS.values() for name in names}  # pip's table
    top = {line.split()[1] for line, _ in portal_reference.cli_commands(build_parser())}
    assert len(table) > 20 and table == top == listed


@pytest.mark.django_db
def test_every_api_operation_is_in_the_reference():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    operations = {
        op["operationId"]
        for item in schema["paths"].values()
        for method, op in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    }
    page = portal_reference.api_page()
    listed = set(re.findall(r"\| `([A-Za-z0-9_]+)` \|", page))
    assert len(operations) > 30 and operations <= listed
