"""The SSH ingest path: read what a job's metrics files gained since last time.

Offsets are stored in the same transaction as the points they cover, so a crash
between reading and storing re-reads those bytes, and the (series, seq) key
drops whatever was stored already: nothing is lost, nothing is counted twice.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from jobs.metrics import ingest
from jobs.metrics.models import MetricFile
from jobs.slurm import operations

log = logging.getLogger(__name__)


def tail_job(job, max_passes: int = 1) -> int:
    """Ingest new lines of the job's metrics files; returns the number of new points.

    ``max_passes`` > 1 keeps reading until the files are caught up (a job that ended).
    """
    if not job.work_dir or job.cluster_account is None:
        return 0
    directory = f"{job.work_dir}/metrics"
    limit = settings.PORTAL_METRICS_TAIL_BYTES
    inserted = 0
    for _ in range(max_passes):
        offsets = dict(MetricFile.objects.filter(job=job).values_list("name", "offset"))
        chunks = operations.on_account(
            job.cluster_account,
            lambda conn, o=offsets: operations.read_new_bytes(conn, directory, o, limit),
        )
        if not chunks:
            break
        for name, start, data in chunks:
            parsed, used = ingest.parse_lines(data)
            if used == 0 and len(data) >= limit:
                used = len(data)  # one line longer than the read size: damaged, skip it
            for error in parsed.errors[:5]:
                log.warning("job %s %s: %s", job.pk, name, error)
            with transaction.atomic():
                inserted += ingest.ingest(job, parsed.records).inserted
                MetricFile.objects.update_or_create(
                    job=job, name=name, defaults={"offset": start + used}
                )
        if all(len(data) < limit for _, _, data in chunks):
            break
    return inserted
