"""The served stack that `make bench-load` measures, shared by its parts (bench/load.py and
bench/load_live.py): gunicorn with the uvicorn worker (HTTP + websockets) on the seeded
PostgreSQL database, as tests/livestack.py and `make demo` run it, with one web worker per
core, and optionally a Celery worker. Its own Redis database and key prefix, so a run never
shares cache keys, throttling or channel groups with another.

Import it as ``bench.loadstack`` (the repository root on sys.path, as bench/load.py puts it).
The process that uses it must have run ``django.setup()`` with ``DATABASE_URL`` pointing at
the same database (bench/load.py does): logging in writes a session row there, and the
served processes read it with the same SECRET_KEY (both take it from the environment).

    stack = LoadStack(database_url, tmp).start()
    cookie = stack.cookie_header("load-0000")     # "sessionid=..." for wrk's -H
    ...
    stack.stop()

A part's figures are ``Row``s: the figure's name, its value and the SQL queries behind one
request (as text: "12", "12 -> 12 (flat)", "-" where none were measured).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from bench.netutil import free_port
from devtools.releases import checkout, schema_of  # noqa: F401 (bench/load.py, bigpages.py)

ROOT = Path(__file__).resolve().parents[1]

# What the load run must not be stopped by: per-user and per-cluster rate limits are a
# protection for one user's mistakes, not what a centre's aggregate load is measured against.
UNTHROTTLED = {
    "PORTAL_API_RATE": "100000000/min",
    "PORTAL_PAGE_CLUSTER_RATE": "100000000/min",
    "PORTAL_METRICS_INGEST_RATE": "100000000/min",
    "PORTAL_SESSION_REGISTER_RATE": "100000000/min",
}


@dataclass
class Row:
    """One line of the table `make bench-load` prints."""

    figure: str
    value: str
    queries: str = "-"


def redis_url(db: int = 11) -> str:
    """The repo's Redis (var/redis.url, with its password) on database ``db``."""
    url = os.environ.get("REDIS_URL") or (ROOT / "var" / "redis.url").read_text().strip()
    base, _, tail = url.rpartition("/")
    return f"{base}/{db}" if tail.isdigit() else f"{url}/{db}"


@dataclass
class LoadStack:
    database_url: str
    tmp: Path
    web_workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    redis_db: int = 11
    prefix: str = "loadweb"
    env_extra: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    root: Path = ROOT  # the checkout served: another commit's for a before-and-after

    @property
    def cores(self) -> int:
        """The machine's core count (os.cpu_count()), what per-core figures divide by."""
        return os.cpu_count() or 1

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The environment of the served processes (and of helpers that start their own)."""
        return {
            **os.environ,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": redis_url(self.redis_db),
            "PORTAL_CACHE_PREFIX": self.prefix,
            "PORTAL_CELERY_QUEUE": f"{self.prefix}-celery",
            "PORTAL_DEMO": "1",
            "PORTAL_URL": self.base_url,
            "STATIC_ROOT": str(self.tmp / "static"),
            **UNTHROTTLED,
            **self._same_secret(),
            **self.env_extra,
        }

    def _same_secret(self) -> dict[str, str]:
        """Another checkout's processes would make their own development key (in their
        own var/) and refuse this process's sessions: they are given this one's."""
        if self.root == ROOT:
            return {}
        from django.conf import settings  # noqa: PLC0415 - set up by then (session())

        return {"SECRET_KEY": settings.SECRET_KEY}

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.tmp / f"{name}.log", "a")  # noqa: SIM115 - closed with the process
        env = self.env
        if name == "web":  # as deployed (docs/run/deploy.md): a bounded pool per web process
            env = {"PORTAL_DB_POOL_MAX": "10", **env}
        self.procs[name] = subprocess.Popen(
            argv, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT
        )

    def start(self, *, celery: bool = False) -> LoadStack:
        """collectstatic, then gunicorn with ``web_workers`` uvicorn workers (and a Celery
        worker if ``celery``); returns once the login page answers."""
        self.tmp.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
            cwd=self.root,
            env=self.env,
            check=True,
            timeout=300,
        )
        bin_dir = Path(sys.executable).parent
        self._spawn(
            "web",
            [
                str(bin_dir / "gunicorn"),
                "portal.asgi:application",
                "-k",
                "uvicorn_worker.UvicornWorker",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(self.web_workers),
                "--backlog",
                "4096",
                "--graceful-timeout",
                "2",
            ],
        )
        if celery:
            self.start_worker()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.base_url}/accounts/login/", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the web server did not start; see {self.tmp / 'web.log'}")

    def start_worker(self, concurrency: int = 2) -> None:
        self._spawn(
            "worker",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "portal",
                "worker",
                "--concurrency",
                str(concurrency),
                "--without-mingle",
                "--without-gossip",
                "--loglevel",
                "WARNING",
            ],
        )

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.procs.clear()

    def __enter__(self) -> LoadStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- logging in ----------------------------------------------------------------------

    def session(self, username: str) -> tuple[str, str]:
        """(cookie name, value) of a fresh logged-in session of ``username``, written to the
        stack's database as a real login would (django.setup() must have run on it)."""
        from django.conf import settings  # noqa: PLC0415 - only once Django is set up
        from django.contrib.auth import get_user_model  # noqa: PLC0415
        from django.test import Client  # noqa: PLC0415

        user = get_user_model().objects.get(username=username)
        client = Client()
        client.force_login(user)
        name = settings.SESSION_COOKIE_NAME
        return name, client.cookies[name].value

    def cookie_header(self, username: str) -> str:
        """The ``Cookie:`` header value for ``username``'s session ("name=value")."""
        name, value = self.session(username)
        return f"{name}={value}"
