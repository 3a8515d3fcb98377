from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    """Projects: a scheduler's accounts (Slurm accounts, HTCondor accounting groups) as
    teams whose members see, share and spend one allocation together."""

    name = "projects"
    label = "projects"
    verbose_name = "Projects"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core import checks

        checks.register(check_group_grants)


def check_group_grants(app_configs=None, **kwargs):
    """PORTAL_PROJECT_GROUPS' entries, checked at start-up (manage.py check)."""
    from django.conf import settings
    from django.core import checks

    from projects.grants import parse

    _, errors = parse(settings.PORTAL_PROJECT_GROUPS)
    return [checks.Error(message, id="projects.E001") for message in errors]
