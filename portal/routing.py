"""Websocket routes of every app, collected in one list for portal.asgi."""

from django.urls import path

from jobs.consumers import JobUpdatesConsumer, MetricsConsumer

websocket_urlpatterns = [
    path("ws/jobs/", JobUpdatesConsumer.as_asgi()),
    path("ws/jobs/<int:job_id>/", JobUpdatesConsumer.as_asgi()),
    path("ws/jobs/<int:job_id>/metrics/", MetricsConsumer.as_asgi()),
]
