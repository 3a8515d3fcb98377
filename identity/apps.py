from django.apps import AppConfig


class IdentityConfig(AppConfig):
    name = "identity"
    label = "identity"
    verbose_name = "Sign-in with an identity provider"
    default_auto_field = "django.db.models.BigAutoField"
