"""Endpoints' rules, written once for the REST API, the CLI and the pages: who may serve
a version and see an endpoint (the registry's project roles), keys and their bounds,
revocation (the keys' HAProxy entries dropped before the answer), the serving job.
Errors are EndpointError: a message for the person and an HTTP status."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from clusters.models import Partition
from common.api_errors import Refusal
from endpoints import routes, tasks
from endpoints.models import MAX_KEY_DAYS, MAX_RATE, Endpoint, EndpointKey
from identity import audit
from jobs import lifecycle
from projects import access
from projects.models import Role, at_least
from registry import service as registry
from registry.models import ModelVersion

NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}\Z")
MAX_ENDPOINTS_PER_PERSON = 50
# What a person chooses for an endpoint's job, and the bounds of the numbers.
FIELDS = ("kind", "partition", "cpus", "memory_gb", "gpus", "time_limit_minutes", "idle_minutes")
BOUNDS = {
    "cpus": (1, 256),
    "memory_gb": (1, 4096),
    "gpus": (0, 64),
    "time_limit_minutes": (5, 60 * 24 * 30),
    "idle_minutes": (0, 60 * 24 * 30),
}


class EndpointError(Refusal):
    """A rule of endpoints said no (the API answers it with common.api_errors.Refused)."""


def visible(user: Any):
    """Endpoints the person sees: theirs, their projects' (staff: every one)."""
    if access.sees_every_job(user):
        return Endpoint.objects.all()
    projects = sorted(access.roles(user))
    return Endpoint.objects.filter(Q(owner_id=user.pk) | Q(project_id__in=projects))


def may_manage(user: Any, endpoint: Endpoint) -> bool:
    """Start, stop or remove it: its owner (the job runs as them), never anyone else."""
    return endpoint.owner_id == getattr(user, "pk", None)


# -- the serving job --------------------------------------------------------------------------


def _partition(version: ModelVersion, name: str) -> Partition:
    found = Partition.objects.filter(cluster_id=version.cluster_id)
    chosen = found.filter(name=name).first() if name else None
    if chosen is None and version.job is not None:
        chosen = version.job.partition
    if chosen is None:
        chosen = found.order_by("name").first()
    if chosen is None:
        raise EndpointError(f"Cluster {version.cluster.name} has no partition to serve on.")
    return chosen


def checked_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """The endpoint's job fields ``body`` gives (FIELDS), each checked: numbers whole and
    within BOUNDS, words at most 64 characters."""
    fields: dict[str, Any] = {}
    for name in FIELDS:
        if name not in body:
            continue
        value = body[name]
        if name in BOUNDS:
            low, high = BOUNDS[name]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise EndpointError(f"{name} is a whole number from {low} to {high}.")
            fields[name] = value
        elif isinstance(value, str):
            fields[name] = value[:64]
    return fields


def serve(user: Any, version: ModelVersion, name: str, **fields: Any) -> Endpoint:
    """A new endpoint for ``version`` (stopped: ``start`` starts it)."""
    if not registry.may_change(user, version.model):
        raise EndpointError("Serving this model takes a member's role in its project.", 403)
    if version.status != ModelVersion.Status.READY:
        raise EndpointError("Only a version whose files were read (READY) is served.", 409)
    if version.job is None:
        raise EndpointError("The version's job is gone: nothing says where to run it.", 409)
    if len(version.path) > 1000:
        raise EndpointError("The version's folder path is over 1,000 characters: move it.")
    if not NAME.match(name or ""):
        raise EndpointError("A name is 1 to 63 lower-case letters, digits and '-'.")
    kind = fields.pop("kind", Endpoint.Kind.MLFLOW)
    if kind not in Endpoint.Kind.values:
        raise EndpointError(f"kind is one of {', '.join(Endpoint.Kind.values)}.")
    if Endpoint.objects.filter(owner=user).count() >= MAX_ENDPOINTS_PER_PERSON:
        raise EndpointError(f"At most {MAX_ENDPOINTS_PER_PERSON} endpoints each.", 409)
    partition = _partition(version, fields.pop("partition", ""))
    try:
        with transaction.atomic():
            return Endpoint.objects.create(
                name=name,
                owner=user,
                project=version.model.project,
                version=version,
                kind=kind,
                partition=partition.name,
                **fields,
            )
    except IntegrityError:
        raise EndpointError(f"You already have an endpoint named {name}.", 409) from None


def wake(endpoint: Endpoint) -> bool:
    """A request with one of its keys reached a stopped endpoint: start it as its owner
    (the key is the owner's word for it). A failed one stays failed: its owner decides."""
    moved = Endpoint.objects.filter(pk=endpoint.pk, state=Endpoint.State.STOPPED).update(
        state=Endpoint.State.STARTING, job=None, message="", updated_at=timezone.now()
    )
    if moved:
        transaction.on_commit(lambda: tasks.start_endpoint.delay(endpoint.pk))
    return bool(moved)


def request_start(user: Any, endpoint: Endpoint) -> Endpoint:
    """Start a stopped (or failed) endpoint: its files are checked, then its job launched
    (endpoints.tasks.start_endpoint)."""
    if not may_manage(user, endpoint):
        raise EndpointError("Only the endpoint's owner starts it (its job runs as them).", 403)
    moved = Endpoint.objects.filter(
        pk=endpoint.pk, state__in=(Endpoint.State.STOPPED, Endpoint.State.FAILED)
    ).update(state=Endpoint.State.STARTING, job=None, message="", updated_at=timezone.now())
    if not moved:
        raise EndpointError(f"The endpoint is {endpoint.state} already.", 409)
    transaction.on_commit(lambda: tasks.start_endpoint.delay(endpoint.pk))
    endpoint.refresh_from_db()
    return endpoint


def stop(endpoint: Endpoint, reason: str) -> None:
    """Its job cancelled, its route taken away; the endpoint stays, stopped."""
    job = endpoint.job
    Endpoint.objects.filter(pk=endpoint.pk).update(
        state=Endpoint.State.STOPPED, message=reason, updated_at=timezone.now()
    )
    if job is not None and not job.is_final:
        lifecycle.cancel(job, reason)
    routes.push(endpoint.pk)


# -- keys -------------------------------------------------------------------------------------


def issue_key(
    user: Any,
    name: str,
    *,
    days: int = 90,
    rate: int = 10,
    project_id: int | None = None,
    endpoint_ids: list[int] | None = None,
) -> tuple[EndpointKey, str]:
    """A key of the person's (or, for a project's manager, of the project's): the secret is
    returned once. Its grants reach HAProxy before this returns."""
    if not isinstance(name, str) or not 1 <= len(name.strip()) <= 100:
        raise EndpointError("A key's name is 1 to 100 characters.")
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_KEY_DAYS:
        raise EndpointError(f"days is a whole number from 1 to {MAX_KEY_DAYS}.")
    if isinstance(rate, bool) or not isinstance(rate, int) or not 1 <= rate <= MAX_RATE:
        raise EndpointError(f"rate is a whole number of requests a second, 1 to {MAX_RATE}.")
    if project_id is not None and not (
        access.sees_every_job(user)
        or at_least(access.role_in(user, project_id) or "", Role.MANAGER)
    ):
        raise EndpointError("Only the project's managers make its keys.", 403)
    chosen: list[Endpoint] = []
    if endpoint_ids:
        mine = Endpoint.objects.filter(Q(project_id=project_id) if project_id else Q(owner=user))
        chosen = list(mine.filter(pk__in=endpoint_ids[:100]))
        if len(chosen) != len(set(endpoint_ids[:100])):
            raise EndpointError("A key lists only endpoints it may open.", 400)
    with transaction.atomic():
        key, secret = EndpointKey.issue(
            user,
            name.strip(),
            days=days,
            rate=rate,
            project_id=project_id,
            all_endpoints=not chosen,
        )
        key.endpoints.set(chosen)
    routes.push_keys(key)
    key_changed(audit.Action.ENDPOINT_KEY_CREATE, key, user)
    return key, secret


def revoke_key(user: Any, key: EndpointKey) -> None:
    """Refused by HAProxy before this returns (its entries dropped on every instance)."""
    mine = key.owner_id == user.pk
    manager = key.project_id is not None and at_least(
        access.role_in(user, key.project_id) or "", Role.MANAGER
    )
    if not (mine or manager):
        raise EndpointError("Only its owner (or its project's managers) revokes a key.", 403)
    if EndpointKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    ):
        key_changed(audit.Action.ENDPOINT_KEY_REVOKE, key, user)
    routes.push_keys(key)


def key_changed(what: str, key: EndpointKey, user: Any) -> None:
    """Its audit row: the key named by id, first characters, name and whose (never its
    secret), the person who acted."""
    whose = f"project {key.project_id}" if key.project_id else key.owner.get_username()
    name = " ".join(key.name.split())[:100]
    opens = "all" if key.all_endpoints else ",".join(str(e.pk) for e in key.endpoints.all()[:20])
    audit.record(
        what,
        audit.Outcome.OK,
        user=user,
        target=f"endpoint key {key.pk} ({key.prefix}…, '{name}') of {whose}, opens {opens}",
    )
