from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    label = "ops"
    verbose_name = "Operations: metrics"

    def ready(self) -> None:
        from ops import signals  # noqa: F401 (Celery's signals: queue age, dead workers)
