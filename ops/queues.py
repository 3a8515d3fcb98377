"""Celery's queues as the metrics see them, read from the broker at each scrape: how many
messages wait in each queue and how long the oldest has waited (from the time its
publisher stamped on it, ops/signals.py). Bounded: one LLEN and one LINDEX per queue and
priority, the oldest message read only up to MESSAGE_MAX bytes."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

from celery import current_app
from django.conf import settings
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ops.signals import PUBLISHED

log = logging.getLogger(__name__)

MESSAGE_MAX = 256 * 1024


def published_at(raw: bytes | str | None) -> float | None:
    """When a kombu Redis message (its JSON envelope) was published, where it says."""
    if raw is None or len(raw) > MESSAGE_MAX:
        return None
    try:
        envelope = json.loads(raw)
    except ValueError:
        return None
    headers = envelope.get("headers") if isinstance(envelope, dict) else None
    value = headers.get(PUBLISHED) if isinstance(headers, dict) else None
    return float(value) if isinstance(value, int | float) and value > 0 else None


class QueueCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        length = GaugeMetricFamily(
            "portal_celery_queue_length",
            "Task messages waiting in a Celery queue.",
            labels=["queue"],
        )
        age = GaugeMetricFamily(
            "portal_celery_queue_oldest_task_age_seconds",
            "How long the oldest waiting task of a Celery queue has waited (0: none waits).",
            labels=["queue"],
        )
        up = GaugeMetricFamily(
            "portal_celery_broker_up", "1 when the broker answered this scrape, else 0."
        )
        try:
            found = list(self._read())
        except Exception as exc:  # noqa: BLE001 - a broker outage is a 0, not a failed scrape
            log.warning("metrics: the broker did not answer: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        now = time.time()
        for name, waiting, oldest in found:
            length.add_metric([name], waiting)
            age.add_metric([name], max(0.0, now - oldest) if oldest else 0.0)
        yield from (length, age, up)

    def _read(self) -> Iterator[tuple[str, int, float | None]]:
        # The app portal/celery.py made (current_app: this floor does not import the top).
        with current_app.connection_for_read() as connection:
            channel: Any = connection.default_channel  # (kombu's Redis channel)
            client = channel.client
            steps = getattr(channel, "priority_steps", [0])
            for queue in settings.CELERY_TASK_QUEUES:
                keys = [channel._q_for_pri(queue.name, step) for step in steps]
                waiting, oldest = 0, None
                for key in dict.fromkeys(keys):
                    waiting += int(client.llen(key))
                    stamp = published_at(client.lindex(key, -1))
                    if stamp is not None and (oldest is None or stamp < oldest):
                        oldest = stamp
                yield queue.name, waiting, oldest
