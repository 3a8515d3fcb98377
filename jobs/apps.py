from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs and catalog"

    def ready(self) -> None:
        from jobs import broadcast, signals

        # Pages see every change a model reports (models import no broadcasting).
        signals.job_updated.connect(broadcast.on_job_updated, dispatch_uid="jobs.broadcast")
