"""ASGI entry point of the session proxy: uvicorn proxy.asgi:application"""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()

from proxy.app import ProxyApp  # noqa: E402

application = ProxyApp()
