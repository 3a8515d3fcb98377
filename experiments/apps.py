from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    """Hyper-parameter sweeps and K-fold runs."""

    name = "experiments"
    label = "experiments"
    verbose_name = "Experiments"

    def ready(self) -> None:
        from experiments import tasks
        from jobs import outbox

        # A trial's job ended: its experiment steps now (jobs/ never calls experiments).
        outbox.register("experiment", tasks.queue_steps)
