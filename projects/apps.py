from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    """Projects: a scheduler's accounts (Slurm accounts, HTCondor accounting groups) as
    teams whose members see, share and spend one allocation together."""

    name = "projects"
    label = "projects"
    verbose_name = "Projects"
    default_auto_field = "django.db.models.BigAutoField"
