from django.apps import AppConfig


class MetricsConfig(AppConfig):
    """Training metrics, a nested app of jobs: storage, ingest, queries, live updates, API."""

    name = "jobs.metrics"
    label = "metrics"
    verbose_name = "Training metrics"
