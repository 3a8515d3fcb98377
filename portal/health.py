"""``/healthz``: what HAProxy asks every web instance (proxy/templates/proxy/haproxy.cfg).

200 while this instance answers and reaches the database; 503 otherwise, so HAProxy takes
it out and sends its users to the others. It reads no session and touches nothing else:
Redis is shared by every instance, so its outage is no reason to prefer one over another.
"""

from __future__ import annotations

from django.db import connection
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from jobs.api.errors import DATABASE_DOWN


@never_cache
@require_safe
def healthz(request) -> HttpResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DATABASE_DOWN:
        return HttpResponse(b"database unavailable\n", status=503, content_type="text/plain")
    return HttpResponse(b"ok\n", content_type="text/plain")
