"""Serve the Plotly bundle that ships inside the plotly package, as static/plotly/plotly.min.js."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

NAME = "plotly.min.js"
PREFIX = "plotly"


def bundle_dir() -> Path:
    return Path(importlib.util.find_spec("plotly").origin).parent / "package_data"


class PlotlyFinder(BaseFinder):
    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        if path == f"{PREFIX}/{NAME}" and (bundle_dir() / NAME).exists():
            found = str(bundle_dir() / NAME)
            return [found] if (find_all or kwargs.get("all")) else found
        return [] if (find_all or kwargs.get("all")) else None

    def list(self, ignore_patterns):
        storage = FileSystemStorage(location=bundle_dir())
        storage.prefix = PREFIX
        yield NAME, storage
