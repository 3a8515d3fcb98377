"""The pages link into this version's docs where a concept is used ({% doc %}, the
footer on every page), and every page they name is one the docs have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import factories

ROOT = Path(__file__).resolve().parents[2]
DOC_TAG = re.compile(r'\{% doc "([^"]+)" "[^"]+" %\}')


def doc_links() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for template in ROOT.glob("*/templates/**/*.html"):
        for page in DOC_TAG.findall(template.read_text()):
            found.setdefault(page, []).append(str(template.relative_to(ROOT)))
    return found


def test_every_page_a_template_links_to_is_in_the_docs():
    links = doc_links()
    assert {"use/projects", "start/first-notebook"} <= set(links)
    missing = {
        page: where for page, where in links.items() if not (ROOT / "docs" / f"{page}.md").is_file()
    }
    assert missing == {}


@pytest.mark.django_db
def test_every_page_has_the_docs_in_its_footer_and_projects_say_what_they_are(client):
    owner = factories.user("owner")
    project = factories.project(factories.cluster(), "vision", [owner])
    client.force_login(owner)
    for url in ("/", "/launch/", "/projects/", f"/projects/{project.pk}/", "/account/"):
        page = client.get(url).content.decode()
        assert '<footer class="bottom"><a href="/docs/">Documentation</a>' in page, url
    for url in ("/projects/", f"/projects/{project.pk}/"):
        page = client.get(url).content.decode()
        assert (
            'href="/docs/use/projects.html" target="_blank" rel="noopener">What is a project?</a>'
            in page
        )
    # A newcomer's empty dashboard points at the Start tutorials.
    assert 'href="/docs/start/first-notebook.html"' in client.get("/").content.decode()
