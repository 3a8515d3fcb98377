from django.apps import AppConfig


class EndpointsConfig(AppConfig):
    """Model endpoints and their API keys."""

    name = "endpoints"
    label = "endpoints"
    verbose_name = "Model endpoints"
