"""Requests for endpoint hosts (ep-<id>.PROXY_SESSION_DOMAIN) that HAProxy hands to the
portal: only ``/_portal/endpoint/<id>/...`` (an endpoint not routed now) is answered,
by views.not_routed; nothing else of the portal answers on such a host. First in the
chain with the session hosts' middleware, before ALLOWED_HOSTS is read."""

from __future__ import annotations

import re

from django.conf import settings
from django.http import HttpResponseNotFound

from endpoints import views

ENDPOINT_LABEL = re.compile(r"ep-([0-9a-f]{32})\Z")


def endpoint_id_of(host: str) -> str | None:
    name = host.rsplit(":", 1)[0].lower().removesuffix(".")
    suffix = "." + settings.PROXY_SESSION_DOMAIN.lower()
    if not name.endswith(suffix):
        return None
    found = ENDPOINT_LABEL.match(name[: -len(suffix)])
    return found[1] if found else None


class EndpointHostMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        public_id = endpoint_id_of(request.META.get("HTTP_HOST", ""))
        if public_id is None:
            return self.get_response(request)
        if request.path.startswith(f"/_portal/endpoint/{public_id}/"):
            return views.not_routed(request, public_id)
        return HttpResponseNotFound(b"Not found", content_type="text/plain")
