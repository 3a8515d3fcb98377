from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs and catalog"

    def ready(self) -> None:
        from django.conf import settings
        from django.db.models.signals import post_save

        from jobs import audit, broadcast, signals

        # Pages see every change a model reports (models import no broadcasting).
        signals.job_updated.connect(broadcast.on_job_updated, dispatch_uid="jobs.broadcast")
        post_save.connect(
            audit.revoke_tokens_when_deactivated,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="jobs.audit.revoke_tokens_when_deactivated",
        )
