"""jobs/ reaches session links only through jobs/sessions.py, which the proxy fills."""

import ast
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from jobs import sessions
from proxy.models import SessionLink

JOBS = Path(__file__).resolve().parents[2] / "jobs"


def test_the_proxy_registers_its_session_links_at_start_up():
    assert sessions.links() is SessionLink


def test_without_the_proxy_app_session_jobs_say_what_is_missing(monkeypatch):
    monkeypatch.setattr(sessions, "_links", None)
    with pytest.raises(ImproperlyConfigured, match="proxy app"):
        sessions.links()


@pytest.mark.parametrize(
    "path", sorted(p for p in JOBS.rglob("*.py") if "migrations" not in p.parts), ids=str
)
def test_jobs_imports_neither_the_proxy_nor_the_pages(path):
    for node in ast.walk(ast.parse(path.read_text())):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        assert not [n for n in names if n.split(".")[0] in ("proxy", "frontend")], path
