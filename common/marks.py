"""Marks a view carries for the ASGI entry (portal/serving.py, portal/body_limits.py),
kept on the library floor so that any app may mark its views without importing the
server's entry: ``streaming_view`` (served by Django's ASGI handler, not on the thread
pool) and ``accepts_body`` (a body larger than the default from someone signed in)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.urls import Resolver404, resolve

View = TypeVar("View", bound=Callable[..., Any])


def streaming_view(view: View) -> View:
    """Mark a view as one that streams its request or its response for long: served by
    Django's ASGI handler, not on the thread pool. (Decorators made with functools.wraps
    carry the mark outwards.)"""
    view.streaming = True  # type: ignore[attr-defined]
    return view


def streams(path: str, urlconf: str | None = None) -> bool:
    """The view at ``path`` is a ``streaming_view`` (the one place that asks: here, and
    clusters/share.py, whose deadline such a view does not get)."""
    try:
        match = resolve(path, urlconf)
    except Resolver404:
        return False
    return bool(getattr(match.func, "streaming", False))


def accepts_body(limit: Callable[[], int]) -> Callable[[View], View]:
    """Mark a view as taking bodies of up to ``limit()`` bytes (read from the settings at
    each request) from a signed-in person. (Decorators made with functools.wraps carry the
    mark outwards.)"""

    def mark(view: View) -> View:
        view.body_limit = limit  # type: ignore[attr-defined]
        return view

    return mark


# What a multipart form adds around a file it carries (its boundaries and other fields).
FORM_OVERHEAD = 1024**2


def default_limit() -> int:
    return int(settings.PORTAL_BODY_MAX_BYTES)


def largest() -> int:
    """The largest body any address takes (HAProxy's limit in front of the portal)."""
    return max(
        default_limit(),
        int(settings.PORTAL_UPLOAD_CHUNK_BYTES),
        int(settings.PORTAL_IMPORT_MAX_UPLOAD_BYTES) + FORM_OVERHEAD,
    )
