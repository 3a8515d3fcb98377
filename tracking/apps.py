from django.apps import AppConfig


class TrackingConfig(AppConfig):
    """Runs read from a cluster or an archive: the MLflow-compatible tracking API, the
    tails of a job's metrics and mlruns files, importers and exports."""

    name = "tracking"
    label = "tracking"
    verbose_name = "Tracking (MLflow-compatible)"

    def ready(self) -> None:
        from jobs import outbox
        from tracking import tasks

        # A job that ended owes a last read of its metrics files (jobs/models/events.py).
        outbox.register("metrics", tasks.queue_final_tails)
