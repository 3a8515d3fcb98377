"""Serve the Plotly bundle that ships inside the plotly package, as static/plotly/plotly.min.js."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

NAME = "plotly.min.js"
PREFIX = "plotly"


def bundle_dir() -> Path:
    spec = importlib.util.find_spec("plotly")
    if spec is None or spec.origin is None:  # a dependency of the portal: only when broken
        raise ImportError("plotly is not installed")
    return Path(spec.origin).parent / "package_data"


class BundleStorage(FileSystemStorage):
    # collectstatic copies its files under this prefix, as it does a prefixed
    # STATICFILES_DIRS entry's.
    prefix = PREFIX


class PlotlyFinder(BaseFinder):
    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        if path == f"{PREFIX}/{NAME}" and (bundle_dir() / NAME).exists():
            found = str(bundle_dir() / NAME)
            return [found] if (find_all or kwargs.get("all")) else found
        return [] if (find_all or kwargs.get("all")) else None

    def list(self, ignore_patterns):
        storage = BundleStorage(location=bundle_dir())
        yield NAME, storage
