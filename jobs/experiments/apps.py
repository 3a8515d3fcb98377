from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    """Hyper-parameter sweeps and K-fold runs, a nested app of jobs."""

    name = "jobs.experiments"
    label = "experiments"
    verbose_name = "Experiments"

    def ready(self) -> None:
        from jobs import outbox
        from jobs.experiments import tasks

        # A trial's job ended: its experiment steps now (jobs/ never calls experiments).
        outbox.register("experiment", tasks.queue_steps)
