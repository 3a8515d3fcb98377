from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs and catalog"

    def ready(self) -> None:
        from django.conf import settings
        from django.db.models.signals import post_save

        from jobs import audit, broadcast, outbox, signals, tasks

        # Pages see every change a model reports (models import no broadcasting).
        signals.job_updated.connect(broadcast.on_job_updated, dispatch_uid="jobs.broadcast")
        # What a job's change owes, delivered from its JobEvent (jobs/outbox.py).
        outbox.register("stderr", tasks.queue_error_tails)
        outbox.register("attempts", tasks.queue_attempts)
        outbox.register("withdraw", tasks.queue_withdrawals)
        post_save.connect(
            audit.revoke_tokens_when_deactivated,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="jobs.audit.revoke_tokens_when_deactivated",
        )
