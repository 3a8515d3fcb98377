"""Metric storage: one row per (series, sequence number), series per job, key, rank and attempt.

Points have a composite primary key (series, seq): a retried upload, a re-read
file or both ingest paths delivering the same record can never store it twice,
and there is no separate id column or index to maintain. Reads go through the
(series, step) index.
"""

from __future__ import annotations

from django.db import models


class MetricSeries(models.Model):
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="metric_series")
    key = models.CharField(max_length=100)
    rank = models.PositiveIntegerField(default=0)
    attempt = models.PositiveIntegerField(
        default=0, help_text="Slurm's restart count: a requeued job logs a new attempt."
    )
    system = models.BooleanField(default=False, help_text="CPU/GPU/memory sampled by the client.")
    node = models.CharField(max_length=253, blank=True)
    points = models.PositiveBigIntegerField(default=0)
    last_step = models.BigIntegerField(null=True, blank=True)
    last_value = models.FloatField(null=True, blank=True)
    summary = models.BinaryField(
        null=True,
        editable=False,
        help_text="The series in 64 step buckets (metrics/summary.py), for comparisons.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "jobs_metricseries"  # made when metrics were part of the jobs app
        ordering = ["system", "key", "rank", "attempt"]
        constraints = [
            models.UniqueConstraint(
                fields=["job", "key", "rank", "attempt"], name="metric_series_unique"
            )
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} {self.label}"

    @property
    def label(self) -> str:
        label = self.key
        if self.rank:
            label += f" [rank {self.rank}]"
        if self.attempt:
            label += f" (attempt {self.attempt + 1})"
        return label

    def as_dict(self) -> dict:
        return {
            "id": self.pk,
            "job": self.job_id,
            "key": self.key,
            "label": self.label,
            "rank": self.rank,
            "attempt": self.attempt,
            "system": self.system,
            "node": self.node,
            "points": self.points,
        }


class MetricPoint(models.Model):
    pk = models.CompositePrimaryKey("series", "seq")
    # No index of its own (the primary key's leads with it) and no constraint in the
    # database: a point's series comes from the series table in the same transaction,
    # under its job's lock (ingest.py), and Django deletes a series' points with it. The
    # constraint's check of every point inserted, and the third index, cost ingest
    # (bench/load_live.py).
    series = models.ForeignKey(
        MetricSeries,
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    seq = models.BigIntegerField()
    step = models.BigIntegerField()
    value = models.FloatField()
    time = models.FloatField(help_text="Unix time the job logged it.")

    class Meta:
        db_table = "jobs_metricpoint"  # made when metrics were part of the jobs app
        indexes = [models.Index(fields=["series", "step"], name="metric_point_step")]

    def __str__(self) -> str:
        return f"series {self.series_id} #{self.seq}: step {self.step} = {self.value}"


class MetricFile(models.Model):
    """How far the SSH tail has read one of a job's metrics files."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="metric_files")
    name = models.CharField(max_length=100)
    offset = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "jobs_metricfile"  # made when metrics were part of the jobs app
        constraints = [models.UniqueConstraint(fields=["job", "name"], name="metric_file_unique")]

    def __str__(self) -> str:
        return f"job {self.job_id} {self.name} @ {self.offset}"
