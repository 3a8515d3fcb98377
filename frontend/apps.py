from django.apps import AppConfig


class FrontendConfig(AppConfig):
    name = "frontend"

    def ready(self) -> None:
        from portal import signin  # noqa: F401 - connects the failed sign-in counter
