"""Endpoints' work in the background: starting one (its version's files checked against
the manifest first, read on the cluster as the owner), and the periodic reconcile of
HAProxy's endpoint routes (an instance restarted, a key expired)."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.db import close_old_connections
from django.utils import timezone

from clusters import ssh
from clusters.models import ClusterAccount
from endpoints import routes, serving
from endpoints.models import Endpoint
from jobs.task_helpers import PersonTask, person_limits
from registry import manifest

log = logging.getLogger(__name__)


class EndpointTask(PersonTask):
    rows: Any = Endpoint.objects


def _fail(endpoint: Endpoint, message: str) -> None:
    Endpoint.objects.filter(pk=endpoint.pk).update(
        state=Endpoint.State.FAILED, message=message[:2000], updated_at=timezone.now()
    )


@shared_task(
    name="endpoints.tasks.start_endpoint",
    bind=True,
    acks_late=True,
    max_retries=5,
    **person_limits(EndpointTask),
)
def start_endpoint(self, endpoint_id: int) -> None:
    """A STARTING endpoint with no job yet: its files checked, then its job launched."""
    try:
        endpoint = (
            Endpoint.objects.select_related("version", "version__cluster", "version__job", "owner")
            .filter(pk=endpoint_id, state=Endpoint.State.STARTING, job__isnull=True)
            .first()
        )
        if endpoint is None:
            return
        version = endpoint.version
        account = ClusterAccount.for_user(version.cluster, endpoint.owner)
        if account is None:
            _fail(endpoint, f"No account on cluster {version.cluster.name} to serve as.")
            return
        try:
            found = manifest.read_as(
                endpoint.owner,
                account,
                version.path,
                f"manifest of {version} before serving {endpoint.name}",
            )
        except manifest.ManifestError as exc:
            _fail(endpoint, f"The version's files cannot be read: {exc}")
            return
        except ssh.ClusterError as exc:
            if self.request.retries >= self.max_retries:
                _fail(endpoint, f"The cluster could not be read: {str(exc)[:300]}")
                return
            raise self.retry(countdown=min(60, 2 ** (self.request.retries + 1))) from None
        if found.digest != version.manifest_sha256:
            _fail(
                endpoint,
                f"The files of {version.model.name} version {version.version} changed since "
                "it was registered (their manifest differs): it is not served. Register "
                "them again as a new version.",
            )
            return
        try:
            serving.start(endpoint)
        except Exception as exc:  # noqa: BLE001 - a launch refused: said on the endpoint
            _fail(endpoint, f"Its job could not be launched: {exc}")
    finally:
        close_old_connections()


@shared_task(name="endpoints.tasks.reconcile_routes")
def reconcile_routes() -> dict:
    return routes.reconcile()
