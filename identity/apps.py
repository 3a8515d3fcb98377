from django.apps import AppConfig


class IdentityConfig(AppConfig):
    name = "identity"
    label = "identity"
    verbose_name = "Sign-in with an identity provider"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from clusters import signer
        from identity import confirmation, throttle  # noqa: F401 - connects the failed sign-in counter

        # The signer (clusters/signer.py) asks identity's word on a person before it signs.
        signer.vouch_with(confirmation.stale_user_id)
