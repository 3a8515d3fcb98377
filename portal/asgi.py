"""ASGI entry point: Django for HTTP (its WSGI handler on a thread pool, its ASGI handler
for the views that stream: portal/serving.py), Channels for websockets."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

# Django must be set up before anything imports models (consumers do).
django.setup(set_prefix=False)  # (as django.core.asgi.get_asgi_application)

from django.conf import settings  # noqa: E402

from portal.serving import HttpRouter  # noqa: E402
from portal.streamed_body import StreamedBodyHandler  # noqa: E402

# Django's ASGI handler, with upload chunks streamed to their view (portal/streamed_body.py),
# for the views that stream; its WSGI handler on PORTAL_WEB_THREADS threads for the rest.
django_asgi_app = HttpRouter(StreamedBodyHandler(), settings.PORTAL_WEB_THREADS)

from django.core.exceptions import ImproperlyConfigured  # noqa: E402

if (
    settings.PORTAL_SSH_CA_KEY_FILES
    and not settings.PORTAL_SSH_SIGNER_SOCKET
    and not (settings.INSECURE_DEFAULTS_ALLOWED)
):
    # The web tier faces the internet: it asks the signer, it never holds the CA key.
    raise ImproperlyConfigured(
        "The web tier must not read the SSH CA key: run `manage.py ssh_signer` with "
        "PORTAL_SSH_CA_KEY_FILES (deploy/systemd/portal-signer.service) and give web processes "
        "PORTAL_SSH_SIGNER_SOCKET instead of the key files."
    )

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from identity.middleware import ConfirmedWebsocketMiddleware  # noqa: E402
from portal.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(ConfirmedWebsocketMiddleware(URLRouter(websocket_urlpatterns)))
        ),
    }
)

# What is loaded by now lives as long as the process: import every view too (the URL
# configuration), then move all of it out of the garbage collector's sight (gc.freeze(),
# as Instagram does for its Django workers). A full collection during a request then
# scans what requests made, not the framework's 150,000 objects: those scans were 90 ms
# pauses in a comparison of 1,000 runs (bench/bigpages.py), at random in any request.
import gc  # noqa: E402

from django.urls import get_resolver  # noqa: E402

get_resolver().url_patterns  # noqa: B018 - imports the URL configuration and its views
gc.freeze()
