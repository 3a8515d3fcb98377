"""``/metrics``: the Prometheus exposition of every process of this host (multiprocess
mode, common/prometheus.py), of the broker's queues (ops/queues.py) and of the model
endpoints' traffic (endpoints/metrics.py), the last two read at each scrape. Reachable from
PORTAL_METRICS_NETWORKS (the Prometheus servers' addresses) or with a staff member's API
token that has the ``metrics`` scope (``Authorization: Bearer pp_…``); anyone else gets
a 403 that says how."""

from __future__ import annotations

import ipaddress
import os

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    generate_latest,
    multiprocess,
)

from endpoints.metrics import EndpointCollector
from identity import confirmation
from identity.tokens import METRICS, PREFIX, ApiToken
from ops.queues import QueueCollector


def from_allowed_network(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(net) for net in settings.PORTAL_METRICS_NETWORKS)


def has_metrics_token(request) -> bool:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith(PREFIX):
        return False
    row = ApiToken.authenticate(token)
    # The token's person as every other API call asks: staff, and vouched for by the
    # identity provider now (a staff member withdrawn there reads no more metrics).
    return (
        row is not None
        and row.user.is_staff
        and METRICS in row.scope_set
        and confirmation.is_current(row.user)
    )


def exposition() -> bytes:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY  # (this process alone: tests, a shell)
    scraped = CollectorRegistry(auto_describe=False)
    scraped.register(QueueCollector())
    scraped.register(EndpointCollector())
    return generate_latest(registry) + generate_latest(scraped)


@require_GET
def metrics(request):
    if not (
        from_allowed_network(request.META.get("REMOTE_ADDR", "")) or has_metrics_token(request)
    ):
        return HttpResponse(
            "Metrics are served to the addresses in PORTAL_METRICS_NETWORKS, or with a staff "
            "member's API token that has the metrics scope.\n",
            status=403,
            content_type="text/plain",
        )
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
