from django.apps import AppConfig


class RetentionConfig(AppConfig):
    """Retention policies and their plans: which checkpoints of a run stay, which go."""

    name = "retention"
    label = "retention"
    verbose_name = "Retention"
