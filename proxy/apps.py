from django.apps import AppConfig


class ProxyConfig(AppConfig):
    name = "proxy"
    verbose_name = "Session links"

    def ready(self) -> None:
        from jobs import sessions
        from jobs.broadcast import job_changed
        from proxy import routes
        from proxy.models import SessionLink

        job_changed.connect(routes.on_job_changed, dispatch_uid="proxy-routes")
        sessions.register(SessionLink)
