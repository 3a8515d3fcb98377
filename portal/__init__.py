"""The top: settings, URLs, the ASGI entry, the Celery app, health checks."""

from .celery import app as celery_app

__all__ = ("celery_app",)
