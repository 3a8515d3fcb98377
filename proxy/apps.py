from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_save


class ProxyConfig(AppConfig):
    name = "proxy"
    verbose_name = "Session links"

    def ready(self) -> None:
        from identity import accounts
        from identity.signals import withdrawn
        from jobs import sessions
        from jobs.signals import job_updated
        from projects.signals import members_changed
        from proxy import routes
        from proxy.models import SessionLink

        job_updated.connect(routes.on_job_changed, dispatch_uid="proxy-routes")
        post_save.connect(
            routes.on_user_saved, sender=settings.AUTH_USER_MODEL, dispatch_uid="proxy-users"
        )
        members_changed.connect(routes.on_members_changed, dispatch_uid="proxy-openers")
        withdrawn.connect(routes.on_withdrawn, dispatch_uid="proxy-withdrawn")
        accounts.register_urgent(routes.opener_ids)
        sessions.register(SessionLink)
