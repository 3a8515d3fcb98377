from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs and catalog"

    def ready(self) -> None:
        from django.conf import settings
        from django.db.models.signals import post_delete, post_save

        from catalog.models import ContainerImage, SessionApp
        from clusters import signer
        from clusters.models import Cluster, Partition
        from identity import audit
        from jobs import broadcast, listing, node_access, outbox, signals, tasks
        from jobs.models import Job
        from projects.models import Project

        # Cached listings (jobs/listing.py) end when what they show changes, before pages
        # hear of it (receivers run in the order connected): a page that asks again then
        # builds it anew.
        signals.job_updated.connect(listing.on_job_changed, dispatch_uid="jobs.listing")
        # Pages see every change a model reports (models import no broadcasting).
        signals.job_updated.connect(broadcast.on_job_updated, dispatch_uid="jobs.broadcast")
        for signal in (post_save, post_delete):
            signal.connect(listing.on_job_saved_or_deleted, sender=Job, dispatch_uid="listing")
            for named in (ContainerImage, Cluster, Partition, SessionApp, Project):
                signal.connect(listing.on_named_thing_changed, sender=named, dispatch_uid="listing")
            signal.connect(
                listing.on_named_thing_changed,
                sender=settings.AUTH_USER_MODEL,
                dispatch_uid="listing",
            )
        # What a job's change owes, delivered from its JobEvent (jobs/outbox.py).
        signals.event_recorded.connect(outbox.on_event_recorded, dispatch_uid="jobs.outbox")
        outbox.register("stderr", tasks.queue_error_tails)
        outbox.register("attempts", tasks.queue_attempts)
        outbox.register("withdraw", tasks.queue_withdrawals)
        post_save.connect(
            audit.revoke_tokens_when_deactivated,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="identity.audit.revoke_tokens_when_deactivated",
        )
        # A person's own key into their running job: the signer asks this floor.
        signer.answer_personal_with(node_access.answer_personal)
