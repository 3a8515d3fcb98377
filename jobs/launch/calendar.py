"""The cluster's calendar at launch: a job whose time limit runs into a maintenance
reservation on its partition's nodes waits until the maintenance ends (Slurm says
"ReqNodeNotAvail, Reserved for maintenance" and people wait days). The form, the API and a
pending job's page say so before that, with the longest limit that starts before it.

Reservations are read with the person's own login (any login may read them) through the
cluster's adapter, and kept PORTAL_RESERVATIONS_CACHE seconds per cluster."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from clusters import pool, ssh
from clusters.models import Cluster, ClusterAccount
from schedulers import registry as schedulers
from schedulers.seam import Reservation

log = logging.getLogger(__name__)

# A limit offered "to start before it" ends this long before the maintenance starts: the
# job needs a moment to be scheduled and started.
MARGIN = timedelta(minutes=10)


def upcoming(cluster: Cluster, user) -> list[Reservation]:
    """The cluster's maintenance reservations that have not ended ([] when it has none,
    or it could not be read: the form must not fail for it)."""
    key = f"reservations:{cluster.pk}"
    cached = cache.get(key)
    if cached is not None:
        return [from_data(item) for item in cached]
    login = ClusterAccount.for_user(cluster, user)
    if login is None:
        return []
    adapter = schedulers.for_cluster(cluster)
    try:
        found = pool.with_connection(login, adapter.reservations)
    except ssh.ClusterError as exc:
        # Said nothing about, and not asked again for a while: a launch never waits on it.
        log.info("could not read the reservations of %s: %s", cluster, exc)
        cache.set(key, [], settings.PORTAL_RESERVATIONS_CACHE)
        return []
    now = timezone.now()
    kept = [r for r in found or [] if r.maintenance and r.end > now]
    cache.set(key, [as_data(r) for r in kept], settings.PORTAL_RESERVATIONS_CACHE)
    return kept


def as_data(r: Reservation) -> dict:
    return {
        "name": r.name,
        "start": r.start.isoformat(),
        "end": r.end.isoformat(),
        "maintenance": r.maintenance,
        "partitions": sorted(r.partitions),
    }


def from_data(item: dict) -> Reservation:
    return Reservation(
        name=item["name"],
        start=datetime.fromisoformat(item["start"]),
        end=datetime.fromisoformat(item["end"]),
        maintenance=item["maintenance"],
        partitions=frozenset(item["partitions"]),
    )


@dataclass(frozen=True)
class Clash:
    reservation: Reservation
    minutes: int  # the limit asked
    fits: int  # the longest limit that starts before it (0: none; it has begun)

    @property
    def text(self) -> str:
        r = self.reservation
        window = f"{moment(r.start)} until {moment(r.end)}"
        if self.fits <= 0:
            return (
                f"The maintenance {r.name} ({window}) has begun on this partition's nodes: "
                "the job waits until it ends."
            )
        return (
            f"A {span(self.minutes)} run would run into the maintenance {r.name} ({window}) "
            f"and wait until it ends; {span(self.fits)} or less starts before it."
        )


def clash(
    reservations: list[Reservation], partition: str, minutes: int, now: datetime | None = None
) -> Clash | None:
    """The first maintenance on ``partition``'s nodes that a job of ``minutes`` started
    now would run into (None: none)."""
    now = now or timezone.now()
    for r in sorted(reservations, key=lambda r: r.start):
        if not r.maintenance or partition not in r.partitions or r.end <= now:
            continue
        if r.start <= now:
            return Clash(r, minutes, 0)
        if now + timedelta(minutes=minutes) > r.start:
            fits = int((r.start - MARGIN - now).total_seconds() // 60)
            return Clash(r, minutes, max(fits, 0))
    return None


def for_page(cluster: Cluster, user) -> list[dict]:
    """The cluster's maintenance reservations for the launch page's script (which says
    what ``clash`` says as the fields change)."""
    return [
        {**as_data(r), "start_text": moment(r.start), "end_text": moment(r.end)}
        for r in upcoming(cluster, user)
    ]


def moment(when: datetime) -> str:
    return timezone.localtime(when).strftime("%a %d %b %H:%M")


def span(minutes: int) -> str:
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{rest} min"
    return f"{hours} h" if not rest else f"{hours} h {rest} min"


def for_job(job, user) -> Clash | None:
    """A job's clash with the maintenance on its cluster (for the form after launch, the
    API and a pending job's page)."""
    if job.partition_id is None:
        return None
    found = upcoming(job.cluster, user)
    return clash(found, job.partition.name, job.time_limit_minutes) if found else None
