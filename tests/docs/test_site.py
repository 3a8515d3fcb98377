"""The docs site: built by Sphinx with warnings as errors (as `make docs` does), and
served by the portal at /docs/ offline, with its search, and nothing outside the build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.test import override_settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs-html")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-n", "-W", "--keep-going", "-b", "html"]
        + [str(ROOT / "docs"), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_the_site_builds_with_its_sections_and_generated_reference(built):
    for page in ("start", "use", "run", "reference", "explain", "develop"):
        assert (built / page / "index.html").is_file(), page
    generated = ("settings", "cli", "api", "job-states", "audit-actions", "notification-events")
    for page in (*generated, "prometheus-metrics", "management-commands", "portal-metrics"):
        assert (built / "reference" / "generated" / f"{page}.html").is_file(), page
    assert (built / "searchindex.js").is_file()
    # No request leaves the page: every script and stylesheet is the build's own.
    index = (built / "index.html").read_text()
    assert "https://" not in "".join(
        line for line in index.splitlines() if "<script" in line or "stylesheet" in line
    )


@pytest.mark.django_db
def test_the_portal_serves_the_docs_with_search_and_nothing_else(built, client, tmp_path):
    (built.parent / "outside.txt").write_text("not the docs")
    with override_settings(PORTAL_DOCS_DIR=built):
        home = client.get("/docs/")
        assert home.status_code == 200 and b"HPC portal" in b"".join(home.streaming_content)
        assert client.get("/docs/start/").status_code == 200
        assert client.get("/docs/search.html").status_code == 200
        assert client.get("/docs/searchindex.js").status_code == 200
        assert client.get("/docs/reference/generated/settings.html").status_code == 200
        for outside in ("/docs/../outside.txt", "/docs/%2e%2e/outside.txt", "/docs//etc/passwd"):
            answer = client.get(outside)
            assert answer.status_code in (400, 404), outside  # refused, never served
        assert client.get("/docs/no-such-page.html").status_code == 404
    with override_settings(PORTAL_DOCS_DIR=tmp_path / "never-built"):
        answer = client.get("/docs/")
        assert answer.status_code == 404 and b"make docs" in answer.content
