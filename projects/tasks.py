"""Projects' periodic task: each enabled cluster's accounts, one sync at a time."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections

from clusters.models import Cluster
from clusters.task_limits import limits, single_flight
from projects import sync


@shared_task(name="projects.tasks.sync_projects")
def sync_projects() -> None:
    """Periodic (beat, PORTAL_PROJECT_SYNC_INTERVAL): one task per enabled cluster."""
    for cluster_id in Cluster.objects.filter(enabled=True).values_list("pk", flat=True):
        sync_cluster_projects.delay(cluster_id)


@shared_task(name="projects.tasks.sync_cluster_projects", **limits())
def sync_cluster_projects(cluster_id: int) -> dict[str, int]:
    timeout = max(60, int(settings.PORTAL_PROJECT_SYNC_INTERVAL))
    with single_flight(f"projects-sync:{cluster_id}", timeout) as mine:
        if not mine:
            return {}
        try:
            cluster = Cluster.objects.filter(pk=cluster_id, enabled=True).first()
            if cluster is None:
                return {}
            outcome = sync.sync_cluster(cluster)
            return {"joined": outcome.joined, "left": outcome.left, "gone": outcome.gone}
        finally:
            close_old_connections()
