"""Periodic work of the session data path."""

from celery import shared_task

from proxy import routes


@shared_task(name="proxy.tasks.reconcile_routes", ignore_result=True)
def reconcile_routes() -> dict:
    """Beat: every HAProxy instance routes exactly the open sessions (repairs a push
    that was missed, and an instance restarted with no routes)."""
    return routes.reconcile()
