"""Websocket routes of every app, collected in one list for portal.asgi."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from django.urls import path

from jobs.consumers import JobUpdatesConsumer
from metrics.consumers import MetricsConsumer
from notifications.consumers import NotificationsConsumer

if TYPE_CHECKING:
    from channels.consumer import _ASGIApplicationProtocol
    from channels.routing import URLRouter, _ExtendedURLPattern


def websocket_path(route: str, consumer: _ASGIApplicationProtocol) -> _ExtendedURLPattern:
    """``path`` for a Channels consumer, the way Channels routes: Django's path takes any
    callable, though django-stubs types it for HTTP views only."""
    pattern = path(route, consumer)  # type: ignore[arg-type]  # see above: stubs too narrow
    return cast("_ExtendedURLPattern", pattern)  # its callback is the consumer


websocket_urlpatterns: list[_ExtendedURLPattern | URLRouter] = [
    websocket_path("ws/jobs/", JobUpdatesConsumer.as_asgi()),
    websocket_path("ws/jobs/<int:job_id>/", JobUpdatesConsumer.as_asgi()),
    websocket_path("ws/jobs/<int:job_id>/metrics/", MetricsConsumer.as_asgi()),
    websocket_path("ws/notifications/", NotificationsConsumer.as_asgi()),
]
