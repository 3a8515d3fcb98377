"""A database that does not answer is an outage, not a bug: 503 with Retry-After, for pages
(a short page) and for the API (its error format; DRF views get the same from
common.api_errors.exception_handler), never a 500. Redis outages are answered the same way."""

from __future__ import annotations

import logging

from django.http import HttpResponse, JsonResponse

from common.api_errors import (
    DATABASE_DOWN,
    REDIS_DOWN,
    RETRY_AFTER,
    DatabaseUnavailable,
    ServiceUnavailable,
    error_body,
)

log = logging.getLogger(__name__)

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Portal unavailable</title></head>
<body><h1>The portal is unavailable for a moment</h1>
<p>Its database or its cache cannot be reached just now (one may be restarting). Nothing
is lost: reload this page in a few seconds.</p></body></html>
"""


class DatabaseUnavailableMiddleware:
    """Turns a view's django.db.OperationalError/InterfaceError, or Redis not answering
    (page budgets, locks), into a 503. Renders no template: a template's context
    processors would ask the database for the user."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, DATABASE_DOWN):
            unavailable: type[ServiceUnavailable] = DatabaseUnavailable
        elif isinstance(exception, REDIS_DOWN):
            unavailable = ServiceUnavailable
        else:
            return None
        log.warning("unavailable for %s: %s", request.path[:200], str(exception).strip()[:200])
        if request.path.startswith("/api/"):
            response: HttpResponse = JsonResponse(
                error_body(503, unavailable.default_code, str(unavailable.default_detail)),
                status=503,
            )
        else:
            response = HttpResponse(PAGE, status=503, content_type="text/html; charset=utf-8")
        response["Retry-After"] = RETRY_AFTER
        response["Cache-Control"] = "no-store"
        return response
