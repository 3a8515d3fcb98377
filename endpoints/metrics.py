"""The endpoints as /metrics shows them, read from the database at each scrape: what each
one's HAProxy counters said at the last traffic pass (endpoints/traffic.py). Bounded:
one query, at most MAX_ENDPOINTS endpoints (running ones first)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from endpoints.models import Endpoint, meter_figures

MAX_ENDPOINTS = 2000
LABELS = ["endpoint", "owner", "kind"]


class EndpointCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = {
            "running": GaugeMetricFamily(
                "portal_endpoint_running",
                "1 when a model endpoint is running (routed by the proxy), else 0.",
                labels=LABELS,
            ),
            "requests": GaugeMetricFamily(
                "portal_endpoint_requests",
                "Requests the proxy carried to an endpoint since it last started.",
                labels=LABELS,
            ),
            "errors": GaugeMetricFamily(
                "portal_endpoint_server_errors",
                "Of those, answered with a 5xx status.",
                labels=LABELS,
            ),
            "response": GaugeMetricFamily(
                "portal_endpoint_response_seconds",
                "Average time to the answer's first bytes over its last 1,024 requests.",
                labels=LABELS,
            ),
            "total": GaugeMetricFamily(
                "portal_endpoint_total_seconds",
                "Average time to the answer's end (a stream's last token) over its last "
                "1,024 requests.",
                labels=LABELS,
            ),
            "ttft": GaugeMetricFamily(
                "portal_endpoint_time_to_first_token_seconds",
                "A language model endpoint's median time to the first token, as its meter "
                "last reported it.",
                labels=LABELS,
            ),
            "tokens": GaugeMetricFamily(
                "portal_endpoint_tokens_per_second",
                "A language model endpoint's tokens a second once streaming, as its meter "
                "last reported it.",
                labels=LABELS,
            ),
            "idle": GaugeMetricFamily(
                "portal_endpoint_idle_seconds",
                "Seconds since an endpoint's last request (absent: none yet).",
                labels=LABELS,
            ),
        }
        now = timezone.now()
        rows = list(self._read())
        streamed = meter_figures([r["job_id"] for r in rows if r["job_id"] is not None])
        for row in rows:
            labels = [row["name"], row["owner__username"], row["kind"]]
            families["running"].add_metric(labels, 1 if row["state"] == "running" else 0)
            families["requests"].add_metric(labels, row["requests"])
            families["errors"].add_metric(labels, row["errors"])
            families["response"].add_metric(labels, row["response_ms"] / 1000)
            families["total"].add_metric(labels, row["total_ms"] / 1000)
            meter = streamed.get(row["job_id"], {})
            if "ttft_ms" in meter:
                families["ttft"].add_metric(labels, meter["ttft_ms"] / 1000)
            if "tokens_per_second" in meter:
                families["tokens"].add_metric(labels, meter["tokens_per_second"])
            if row["last_request_at"] is not None:
                idle = (now - row["last_request_at"]).total_seconds()
                families["idle"].add_metric(labels, max(0.0, idle))
        yield from families.values()

    def _read(self) -> Iterator[Mapping[str, Any]]:
        rows = Endpoint.objects.order_by("-state", "pk").values(
            "name",
            "owner__username",
            "kind",
            "state",
            "requests",
            "errors",
            "response_ms",
            "total_ms",
            "last_request_at",
            "job_id",
        )
        yield from rows[:MAX_ENDPOINTS]
