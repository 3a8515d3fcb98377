from django.apps import AppConfig


class MetricsConfig(AppConfig):
    """Training metrics: storage, ingest, queries, comparison, live updates, API."""

    name = "metrics"
    label = "metrics"
    verbose_name = "Training metrics"
