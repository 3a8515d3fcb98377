from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """Notifications: events, preferences, the list, email."""

    name = "notifications"
    label = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from jobs import outbox, signals
        from notifications import receivers

        # A job's change owes its owner a word (its JobEvent says so; jobs/outbox.py).
        outbox.register("notify", receivers.queue_for_job_events)
        # An experiment's end (jobs/signals.py) becomes a notification in a task.
        signals.experiment_finished.connect(
            receivers.experiment_finished, dispatch_uid="notify.experiment_finished"
        )
