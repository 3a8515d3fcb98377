"""The registry's work on a cluster: a new version's manifest, read as the person who
registered it (manifest.py), within the task's deadline."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import shared_task
from django.db import close_old_connections
from django.utils import timezone

from clusters import ssh
from clusters.models import ClusterAccount
from jobs.task_helpers import PersonTask, person_limits
from registry import manifest
from registry.models import ModelVersion

log = logging.getLogger(__name__)


class VersionTask(PersonTask):
    """PersonTask for a task that takes a version's id (the person who registered it)."""

    rows: Any = ModelVersion.objects
    owner_field = "registered_by_id"


@shared_task(
    name="registry.tasks.read_manifest",
    bind=True,
    acks_late=True,
    max_retries=5,
    **person_limits(VersionTask),
)
def read_manifest(self, version_id: int) -> None:
    """The files' manifest of a version still pending: READY with it, or FAILED with why."""
    try:
        version = (
            ModelVersion.objects.select_related("cluster", "registered_by", "model")
            .filter(pk=version_id, status=ModelVersion.Status.PENDING)
            .first()
        )
        if version is None:
            return
        account = (
            ClusterAccount.for_user(version.cluster, version.registered_by)
            if version.registered_by
            else None
        )
        if account is None:
            version.failed(f"No account on cluster {version.cluster.name} to read the files as.")
            return
        try:
            found = manifest.read_as(
                version.registered_by,
                account,
                version.path,
                f"manifest of {version} {version.path}",
            )
        except manifest.ManifestError as exc:
            version.failed(str(exc))
            return
        except ssh.ClusterError as exc:
            if self.request.retries >= self.max_retries:
                version.failed(f"The cluster could not be read: {str(exc)[:300]}")
                return
            raise self.retry(countdown=min(60, 2 ** (self.request.retries + 1))) from None
        version.set_manifest(found.entries, found.digest)
        log.info("model %s: manifest of %d files read", version, len(found.entries))
    finally:
        close_old_connections()


# A pending version untouched this long has lost its task (a worker killed, a broker
# restarted empty): sent again. The task reads only what is still pending.
RESEND_AFTER = timedelta(minutes=2)


@shared_task(name="registry.tasks.resend_pending")
def resend_pending() -> int:
    due = list(
        ModelVersion.objects.filter(
            status=ModelVersion.Status.PENDING, updated_at__lt=timezone.now() - RESEND_AFTER
        ).values_list("pk", flat=True)[:500]
    )
    for pk in due:
        read_manifest.delay(pk)
    ModelVersion.objects.filter(pk__in=due).update(updated_at=timezone.now())
    return len(due)
