from django.apps import AppConfig


class RegistryConfig(AppConfig):
    """Registered models and their versions, by reference: files stay where a run wrote
    them on the cluster, checked by a sha256 manifest; MLflow's Model Registry API."""

    name = "registry"
    label = "registry"
    verbose_name = "Model registry"

    def ready(self) -> None:
        # MLflow's Model Registry endpoints join the tracking API a job is given.
        from registry import mlflow_api  # noqa: F401
