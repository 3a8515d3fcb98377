"""Broadcasting new metric points to the job's metrics sockets (metrics/consumers.py)."""

from __future__ import annotations

import logging

from channels.layers import get_channel_layer

from jobs.broadcast import send_to_groups

log = logging.getLogger(__name__)


def metrics_group(job_id: int) -> str:
    return f"metrics-{job_id}"


# A live message carries at most this many points; past it the page re-reads
# the downsampled series instead (one big batch must not flood the socket).
LIVE_POINTS_LIMIT = 5000


def publish_metrics(job_id: int, update: dict) -> None:
    """New points of a job to its metrics sockets ({"series": [...], "points": {id: rows}})."""
    layer = get_channel_layer()
    if layer is None:
        return
    if sum(len(rows) for rows in update["points"].values()) > LIVE_POINTS_LIMIT:
        update = {"series": update["series"], "points": {}, "reload": True}
    try:
        send_to_groups([metrics_group(job_id)], {"type": "metrics.points", "update": update})
    except Exception:  # noqa: BLE001 - the points are stored; pages re-read them
        log.exception("could not publish metrics of job %s", job_id)
