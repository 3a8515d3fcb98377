from django.apps import AppConfig


class DevtoolsConfig(AppConfig):
    """Development and load tooling, apart from the product: registering the dev cluster
    and the HTCondor pool, the demo catalog and user, the load-test population. No models,
    no URLs; its commands are what `make demo`, `make test` and `make bench-load` run."""

    name = "devtools"
    verbose_name = "Development tooling"
