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

from common.api_errors import DATABASE_DOWN


@never_cache
@require_safe
def healthz(request) -> HttpResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DATABASE_DOWN:
        return HttpResponse(b"database unavailable\n", status=503, content_type="text/plain")
    return HttpResponse(b"ok\n", content_type="text/plain")


# --- /readyz ------------------------------------------------------------------------------
# Once this process has seen every migration applied, it does not look again: the schema
# only moves forward while it runs (a rolling upgrade migrates before it starts instances).
_migrated = False


def _migrations_applied() -> bool:
    global _migrated
    if not _migrated:
        from django.db.migrations.executor import MigrationExecutor

        executor = MigrationExecutor(connection)
        _migrated = not executor.migration_plan(executor.loader.graph.leaf_nodes())
    return _migrated


def _check(name: str, probe) -> tuple[str, str]:
    try:
        return name, "ok" if probe() else "not ready"
    except Exception as exc:  # noqa: BLE001 - each dependency's failure is its line
        return name, f"unavailable: {type(exc).__name__}"


def _database() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return True


def _cache() -> bool:
    from django.core.cache import cache

    cache.set("readyz", "1", timeout=10)
    return cache.get("readyz") == "1"


def _broker() -> bool:
    from portal.celery import app

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, timeout=2)
        return conn.connected


@never_cache
@require_safe
def readyz(request) -> HttpResponse:
    """Ready to serve every page: the database answers with every migration applied, and
    the cache and the broker (Redis) answer. A line per dependency; 503 when any is not.
    For an operator and a rolling upgrade's script (wait for it before the next instance);
    HAProxy asks /healthz, which fails only on what is this instance's own."""
    checks = [_check("database", _database)]
    if checks[0][1] == "ok":
        checks.append(_check("migrations", _migrations_applied))
    checks += [_check("cache", _cache), _check("broker", _broker)]
    ready = all(state == "ok" for _, state in checks)
    body = "".join(f"{name}: {state}\n" for name, state in checks)
    return HttpResponse(body.encode(), status=200 if ready else 503, content_type="text/plain")
