"""The SSH ingest path: read what a job's metrics files gained since last time.

Offsets are stored in the same transaction as the points they cover, so a crash
between reading and storing re-reads those bytes, and the (series, seq) key
drops whatever was stored already: nothing is lost, nothing is counted twice.
"""

from __future__ import annotations

import logging

from django.conf import settings

from clusters import files, pool
from metrics import ingest
from metrics.models import MetricFile
from tracking import file_tail

log = logging.getLogger(__name__)


def tail_job(job, max_passes: int = 1) -> int:
    """Ingest new lines of the job's metrics files; returns the number of new points.

    A pass reads at most PORTAL_METRICS_TAIL_BYTES in all and looks at most at
    PORTAL_METRICS_MAX_FILES files, one file at a time (its points and its offset are
    stored before the next file is read), so neither many nor sparse files can make a
    worker hold more than one read in memory. ``max_passes`` > 1 keeps reading until the
    files are caught up (a job that ended).
    """
    if not job.work_dir or job.cluster_account is None:
        return 0
    directory = f"{job.work_dir}/metrics"
    inserted = 0
    for _ in range(max_passes):
        offsets = dict(MetricFile.objects.filter(job=job).values_list("name", "offset"))
        listed = pool.with_connection(
            job.cluster_account, lambda conn: files.list_metric_files(conn, directory)
        )
        budget = settings.PORTAL_METRICS_TAIL_BYTES
        for name, size in listed[: settings.PORTAL_METRICS_MAX_FILES]:
            start = offsets.get(name, 0)
            if size <= start or budget <= 0:
                continue
            try:
                data = pool.with_connection(
                    job.cluster_account,
                    lambda conn, n=name, s=start, b=budget: files.read_chunk(
                        conn, f"{directory}/{n}", s, b
                    ),
                )
            except files.NotARegularFile as exc:
                log.warning("job %s: %s", job.pk, exc)
                continue
            budget -= len(data)
            try:
                inserted += _ingest_chunk(job, name, start, data)
            except ingest.QuotaExceeded as exc:
                log.warning("job %s: %s Its metrics files are no longer read.", job.pk, exc)
                return inserted
        if job.cluster.metrics_over_ssh and budget > 0:
            # An unchanged MLflow script's file store in the work directory (its nodes
            # cannot reach the portal's MLflow API): read the same way, within the budget.
            stored, read = file_tail.tail(job, budget, final=max_passes > 1)
            inserted += stored
            budget -= read
        if budget > 0:
            break  # every file caught up within one pass's budget
    return inserted


def _ingest_chunk(job, name: str, start: int, data: bytes) -> int:
    parsed, used = ingest.parse_lines(data)
    for error in parsed.errors[:5]:
        log.warning("job %s %s: %s", job.pk, name, error)
    return ingest.store_read(job, name, start, parsed.records, used, len(data))
