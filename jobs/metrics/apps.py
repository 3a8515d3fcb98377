from django.apps import AppConfig


class MetricsConfig(AppConfig):
    """Training metrics, a nested app of jobs: storage, ingest, queries, live updates, API."""

    name = "jobs.metrics"
    label = "metrics"
    verbose_name = "Training metrics"

    def ready(self) -> None:
        from jobs import outbox
        from jobs.metrics import tasks

        # A job that ended owes a last read of its metrics files (jobs/models/events.py).
        outbox.register("metrics", tasks.queue_final_tails)
