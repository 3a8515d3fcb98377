"""Sphinx configuration of the portal's documentation (`make docs`; served at /docs/)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

project = "HPC portal"
copyright = "the HPC portal's authors"
extensions = ["myst_parser", "portal_reference", "screens"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "examples"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]
html_theme = "furo"
html_title = "HPC portal"
html_static_path: list[str] = []
# No request leaves the page: the theme's assets are served with the docs (an offline
# centre reads them from its own portal).
html_baseurl = "/docs/"
nitpicky = True
