from django.apps import AppConfig


class ProxyConfig(AppConfig):
    name = "proxy"
    verbose_name = "Session links"
