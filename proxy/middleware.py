"""Requests for session hosts (<id>.PROXY_SESSION_DOMAIN) that HAProxy hands to the portal.

HAProxy passes only ``/_portal/...`` of a session host to the portal; this middleware
makes sure nothing else of the portal answers on such a host (its pages, cookies and
admin stay on the portal's own origin), whatever reaches it. It comes first, before
any middleware that could read the host against ALLOWED_HOSTS or set a cookie.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponseNotFound

from proxy import views
from proxy.models import SESSION_ID


def session_id_of(host: str) -> str | None:
    """The session id if ``host`` (a Host header) is a session host, else None."""
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    suffix = "." + settings.PROXY_SESSION_DOMAIN.lower()
    name = name.lower().removesuffix(".")
    if not name.endswith(suffix):
        return None
    label = name[: -len(suffix)]
    return label if SESSION_ID.match(label) else None


class SessionHostMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        public_id = session_id_of(request.META.get("HTTP_HOST", ""))
        if public_id is None:
            return self.get_response(request)
        if request.method == "GET" and request.path == "/_portal/start":
            return views.session_start(request, public_id)
        if request.method == "GET" and request.path == "/_portal/login":
            return views.session_login(request, public_id)
        return HttpResponseNotFound(b"Not found", content_type="text/plain")
