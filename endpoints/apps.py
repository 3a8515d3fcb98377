from django.apps import AppConfig


class EndpointsConfig(AppConfig):
    """Model endpoints and their API keys."""

    name = "endpoints"
    label = "endpoints"
    verbose_name = "Model endpoints"

    def ready(self) -> None:
        from endpoints import receivers
        from jobs.signals import job_updated

        # After proxy's own receiver: the job's session route is pushed first.
        job_updated.connect(receivers.on_job_changed, dispatch_uid="endpoint-routes")
