from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    """Hyper-parameter sweeps and K-fold runs, a nested app of jobs."""

    name = "jobs.experiments"
    label = "experiments"
    verbose_name = "Experiments"
