"""Rebuild every metric series' comparison summary from its stored points.

Ingest keeps summaries up to date; this is for series stored before they existed (the
metrics migration 0002 runs the same code) or after points were edited by hand."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from metrics.models import MetricSeries
from metrics.summary import rebuild


class Command(BaseCommand):
    help = "Rebuild the per-series summaries comparisons read (metrics/summary.py)."

    def add_arguments(self, parser):
        parser.add_argument("--missing", action="store_true", help="Only series without one.")

    def handle(self, *args, missing: bool = False, **options):
        series = MetricSeries.objects.order_by("pk")
        if missing:
            series = series.filter(summary__isnull=True)
        done = 0
        for pk in series.values_list("pk", flat=True).iterator():
            MetricSeries.objects.filter(pk=pk).update(summary=rebuild(pk))
            done += 1
        self.stdout.write(f"{done} series summarised")
