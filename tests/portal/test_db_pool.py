"""PORTAL_DB_POOL_MAX: on PostgreSQL, a process's threads (ASGI runs each request's view in
one) share at most that many server connections, waiting for one instead of opening more
(checked on the test database in a fresh interpreter)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from django.db import connection

from tests.livestack import ROOT, database_url

THREADS = """
    import django, json, threading; django.setup()
    from django.db import connection, close_old_connections
    pids, lock = [], threading.Lock()
    def query():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid(), pg_sleep(0.2)")
            with lock:
                pids.append(cursor.fetchone()[0])
        connection.close()  # back to the pool (as Django does at a request's end)
    threads = [threading.Thread(target=query) for _ in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    print(json.dumps({"queries": len(pids), "connections": len(set(pids))}))
"""


def run(pool_max: int) -> dict:
    env = {**os.environ, "DATABASE_URL": database_url(), "PORTAL_DB_POOL_MAX": str(pool_max)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(THREADS)],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "portal.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.django_db
def test_threads_share_the_pools_connections():
    if connection.vendor != "postgresql":
        pytest.skip("the pool is PostgreSQL's (psycopg_pool)")
    assert run(2) == {"queries": 8, "connections": 2}
    assert run(0)["connections"] == 8  # without it: one per thread
