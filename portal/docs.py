"""The documentation of this version at /docs/: the Sphinx build `make docs` writes into
PORTAL_DOCS_DIR (DATA_DIR/docs-html), served as files, with no request leaving the page
(the theme's assets and the search index are part of the build). A folder's address
serves its index.html; nothing outside the build is reachable (Django's static ``serve``
joins paths safely); until the docs are built the page says how to build them."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.http import Http404, HttpResponse
from django.views.static import serve


def docs(request, path: str = ""):
    root = Path(settings.PORTAL_DOCS_DIR)
    if not (root / "index.html").is_file():
        return HttpResponse(
            "The documentation is not built on this portal: run `make docs`.",
            status=404,
            content_type="text/plain; charset=utf-8",
        )
    if path == "" or path.endswith("/"):
        path += "index.html"
    try:
        response = serve(request, path, document_root=str(root))
    except Http404:
        raise Http404("no such page in the documentation") from None
    response["Cache-Control"] = "public, max-age=300"
    return response
