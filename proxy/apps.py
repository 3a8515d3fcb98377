from django.apps import AppConfig


class ProxyConfig(AppConfig):
    name = "proxy"
    verbose_name = "Session links"

    def ready(self) -> None:
        from jobs.broadcast import job_changed
        from proxy import routes

        job_changed.connect(routes.on_job_changed, dispatch_uid="proxy-routes")
