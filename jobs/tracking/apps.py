from django.apps import AppConfig


class TrackingConfig(AppConfig):
    name = "jobs.tracking"
    label = "tracking"
    verbose_name = "Tracking (MLflow-compatible)"
