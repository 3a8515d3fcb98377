"""Endpoints and their API keys.

An endpoint serves one registered model version at a stable address,
``ep-<public_id>.<session domain>``, whatever job carries it now (``job``: the current
one; a new one after an idle stop or a failure). A key is a bearer secret shown once:
only its sha256 is kept (here and in HAProxy's map); it opens its owner's endpoints, or
its project's, or the ones listed, until it expires or is revoked."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

KEY_PREFIX = "pe_"
# The endpoint meter's metrics (of the serving job) -> their names in the portal.
METER_KEYS = {
    "endpoint/ttft_ms": "ttft_ms",
    "endpoint/ttft_p95_ms": "ttft_p95_ms",
    "endpoint/latency_ms": "latency_ms",
    "endpoint/tokens_per_second": "tokens_per_second",
}
MAX_KEY_DAYS = 365
MAX_RATE = 1000


def new_public_id() -> str:
    return secrets.token_hex(16)


def digest_of(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def meter_figures(job_ids: list[int]) -> dict[int, dict[str, float]]:
    """The endpoint meters' last figures of these serving jobs, in one query: job id ->
    {METER_KEYS' names: value}; of several attempts' series, the latest."""
    if not job_ids:
        return {}
    from metrics.models import MetricSeries

    rows = MetricSeries.objects.filter(
        job_id__in=job_ids, key__in=list(METER_KEYS), system=False, last_value__isnull=False
    ).order_by("updated_at")
    found: dict[int, dict[str, float]] = {}
    for job_id, key, value in rows.values_list("job_id", "key", "last_value"):
        if value is not None:
            found.setdefault(job_id, {})[METER_KEYS[key]] = value
    return found


class Endpoint(models.Model):
    class Kind(models.TextChoices):
        MLFLOW = "mlflow", "MLflow scoring server (/invocations)"
        OPENAI = "openai", "OpenAI-compatible server (/v1/chat/completions)"

    class State(models.TextChoices):
        STOPPED = "stopped"
        STARTING = "starting"
        RUNNING = "running"
        FAILED = "failed"

    public_id = models.CharField(max_length=32, unique=True, default=new_public_id)
    name = models.SlugField(max_length=64)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="endpoints"
    )
    project = models.ForeignKey(
        "projects.Project",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="endpoints",
    )
    version = models.ForeignKey(
        "registry.ModelVersion", on_delete=models.PROTECT, related_name="endpoints"
    )
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.MLFLOW)
    partition = models.CharField(max_length=64, blank=True)
    cpus = models.PositiveSmallIntegerField(default=1)
    memory_gb = models.PositiveSmallIntegerField(default=2)
    gpus = models.PositiveSmallIntegerField(default=0)
    time_limit_minutes = models.PositiveIntegerField(default=60)
    idle_minutes = models.PositiveIntegerField(
        default=30, help_text="Stopped after this long without a request (0: never)."
    )
    state = models.CharField(max_length=8, choices=State.choices, default=State.STOPPED)
    message = models.TextField(blank=True)
    job = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_request_at = models.DateTimeField(null=True, blank=True)
    running_since = models.DateTimeField(null=True, blank=True)
    # What HAProxy saw since it began to run (endpoints/traffic.py, every pass).
    requests = models.PositiveBigIntegerField(default=0, db_default=0)
    errors = models.PositiveBigIntegerField(default=0, db_default=0)
    response_ms = models.PositiveIntegerField(default=0, db_default=0)
    total_ms = models.PositiveIntegerField(default=0, db_default=0)
    traffic_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="one_endpoint_name")]
        ordering = ["name"]

    def __str__(self) -> str:
        return f"endpoint {self.name}"

    def streamed(self) -> dict[str, float]:
        """What the endpoint meter last reported of its job (on_node/endpoint_meter.py, a
        language model's server): ``ttft_ms``, ``ttft_p95_ms``, ``latency_ms``,
        ``tokens_per_second``, those it has."""
        if self.job_id is None or self.kind != self.Kind.OPENAI:
            return {}
        return meter_figures([self.job_id]).get(self.job_id, {})

    @property
    def log_tail(self) -> str:
        """A failed endpoint's server log, its last lines (its job's stderr, read once the
        job ended: a model server that never became ready says why there)."""
        if self.state != self.State.FAILED or self.job is None:
            return ""
        return self.job.stderr_tail

    @property
    def model_name(self) -> str:
        """What a client names as ``model`` (OpenAI's API): the folder its server loaded,
        as its /v1/models lists it. MLflow's scoring server takes none."""
        return self.version.path if self.kind == self.Kind.OPENAI else ""

    @property
    def url(self) -> str:
        port = (
            f":{settings.PROXY_SESSION_PUBLIC_PORT}" if settings.PROXY_SESSION_PUBLIC_PORT else ""
        )
        scheme = settings.PROXY_SESSION_SCHEME
        return f"{scheme}://ep-{self.public_id}.{settings.PROXY_SESSION_DOMAIN}{port}"


class KeyQuerySet(models.QuerySet):
    def live(self) -> KeyQuerySet:
        return self.filter(revoked_at__isnull=True, expires_at__gt=timezone.now())

    def opening(self, endpoint: Endpoint) -> KeyQuerySet:
        """Live keys that open ``endpoint``: its owner's personal keys, or its project's,
        each for every such endpoint or for the ones it lists."""
        whose = Q(project__isnull=True, owner_id=endpoint.owner_id)
        if endpoint.project_id is not None:
            whose |= Q(project_id=endpoint.project_id)
        return (
            self.live()
            .filter(whose)
            .filter(Q(all_endpoints=True) | Q(endpoints=endpoint))
            .distinct()
        )


class EndpointKey(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="endpoint_keys"
    )
    project = models.ForeignKey(
        "projects.Project",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="endpoint_keys",
        help_text="Set: a project's key (its managers make it), for the project's endpoints.",
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12)
    digest = models.CharField(max_length=64, unique=True)
    all_endpoints = models.BooleanField(default=True)
    endpoints = models.ManyToManyField(Endpoint, blank=True, related_name="keys")
    rate = models.PositiveIntegerField(default=10, help_text="Requests a second at most.")
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = KeyQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"key {self.prefix}… ({self.name})"

    @classmethod
    def issue(cls, owner: Any, name: str, *, days: int, rate: int, **fields: Any):
        """A new key: (row, the secret, shown once)."""
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        row = cls.objects.create(
            owner=owner,
            name=name,
            prefix=secret[:10],
            digest=digest_of(secret),
            rate=rate,
            expires_at=timezone.now() + timedelta(days=days),
            **fields,
        )
        return row, secret

    @property
    def is_live(self) -> bool:
        return self.revoked_at is None and self.expires_at > timezone.now()
