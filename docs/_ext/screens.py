"""Screenshots in the docs come from the browser tests, so they follow the pages.

    ```{screenshot} 20-notebook-ready
    The job page once JupyterLab answers: the Open button.
    ```

shows docs/screens/20-notebook-ready.png, a screenshot the e2e suite takes with that name
(``screenshot(page, "20-notebook-ready")`` in tests/e2e/; `make docs-screens` runs those
tests and copies what they took here). A missing file fails the build (warnings are
errors), unless PORTAL_DOCS_DRAFT=1, for drafting a page before its screenshot exists.
tests/docs/test_screens.py checks that every file here is used and taken by a test."""

from __future__ import annotations

import os
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.util import logging

log = logging.getLogger(__name__)
FOLDER = Path(__file__).resolve().parents[1] / "screens"


class Screenshot(Directive):
    required_arguments = 1
    has_content = True

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        caption = " ".join(self.content).strip()
        if not (FOLDER / f"{name}.png").is_file():
            if os.environ.get("PORTAL_DOCS_DRAFT") == "1":
                return [nodes.paragraph(text=f"[screenshot {name}: {caption}]")]
            log.warning(
                "no screenshot %s in docs/screens (make docs-screens takes it)",
                name,
                location=(self.state.document.settings.env.docname, self.lineno),
            )
            return []
        figure = nodes.figure(classes=["screenshot"])
        figure += nodes.image(uri=f"/screens/{name}.png", alt=caption or name)
        if caption:
            figure += nodes.caption(text=caption)
        return [figure]


def setup(app):
    app.add_directive("screenshot", Screenshot)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
