"""The whole stack as separate processes on the test database, as `make demo` runs it:
gunicorn with the uvicorn worker (HTTP + websockets), a Celery worker and Celery beat."""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.request
import uuid
from pathlib import Path

import redis
from django.conf import settings
from django.db import connection

from devtools.ports import free_port
from tests import polling

ROOT = Path(__file__).resolve().parents[1]


def database_url() -> str:
    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    return f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


_collected_static: Path | None = None


def _collect(env: dict, target: Path) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=ROOT,
        env={**env, "STATIC_ROOT": str(target)},
        check=True,
        timeout=120,
    )


class LiveStack:
    def __init__(
        self,
        tmp: Path,
        sync_interval: float = 1.0,
        env: dict | None = None,
        root: Path = ROOT,
    ):
        """``root``: the checkout whose code the processes run (another commit's, through
        devtools.releases, for an upgrade); ``restart(name, root=...)`` changes one's."""
        self.tmp = tmp
        self.root = root
        self.roots: dict[str, Path] = {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proxy_port = free_port()
        self.queue = f"e2e-{uuid.uuid4().hex[:8]}"
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "PORTAL_DEMO": "1",
            "PORTAL_CELERY_QUEUE": self.queue,
            "PORTAL_SYNC_INTERVAL": str(sync_interval),
            "PORTAL_SYNC_JITTER": "0.2",
            "STATIC_ROOT": str(tmp / "static"),
            "PORTAL_URL": self.url,
            "PROXY_SESSION_PUBLIC_PORT": str(self.proxy_port),
            "PROXY_INSTANCES": f"unix:{tmp / 'proxy' / 'admin.sock'}",
            "PROXY_MAP_PATH": str(tmp / "proxy" / "tokens.map"),
            # As make demo and the systemd units: every process's metrics in one place,
            # which each web instance's /metrics adds up.
            "PROMETHEUS_MULTIPROC_DIR": str(tmp / "prometheus"),
            **(env or {}),
        }
        Path(self.env["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.argv: dict[str, list[str]] = {}

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.tmp / f"{name}.log", "a")  # noqa: SIM115 - closed with the process
        root = self.roots.setdefault(name, self.root)
        run = list(argv)
        if "python:portal.gunicorn_conf" in run and not (root / "portal/gunicorn_conf.py").exists():
            at = run.index("python:portal.gunicorn_conf")  # (code from before it had one)
            del run[at - 1 : at + 1]
        # Its own process group, so kill() reaches a worker's pool processes too.
        proc = subprocess.Popen(
            run,
            cwd=root,
            env=self._env_for(root),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append((name, proc))
        self.argv[name] = argv

    def kill(self, name: str) -> None:
        """SIGKILL a process and everything it started, as the OOM killer or a crash would."""
        import signal

        for entry in [p for p in self.procs if p[0] == name]:
            try:
                os.killpg(entry[1].pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            entry[1].wait(timeout=30)
            self.procs.remove(entry)

    def _env_for(self, root: Path) -> dict:
        """Another checkout's processes get this one's data directory, secret key and Redis
        (they would otherwise make their own in their own var/ and share nothing)."""
        if root == ROOT:
            return self.env
        env = {
            **self.env,
            "PORTAL_DATA_DIR": str(settings.DATA_DIR),
            "SECRET_KEY": settings.SECRET_KEY,
            "REDIS_URL": self.env.get("REDIS_URL") or settings.REDIS_URL,
            "STATIC_ROOT": str(self.tmp / f"static-{root.name}"),  # (its own pages' files)
        }
        if not Path(env["STATIC_ROOT"]).exists():
            subprocess.run(
                [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
                cwd=root,
                env=env,
                check=True,
                timeout=300,
            )
        return env

    def restart(self, name: str, *, hard: bool = False, root: Path | None = None) -> None:
        """Stop a process (SIGTERM and wait, or kill()) and start it again as it was, or
        with the code of ``root``."""
        if root is not None:
            self.roots[name] = root
        if hard:
            self.kill(name)
        else:
            for entry in [p for p in self.procs if p[0] == name]:
                entry[1].terminate()
                entry[1].wait(timeout=30)
                self.procs.remove(entry)
        self._spawn(name, self.argv[name])

    def start(self) -> LiveStack:
        self._collectstatic()
        self._spawn_web("web", self.port)
        self.start_worker()
        self._make_certs()
        self._spawn_proxy([f"127.0.0.1:{self.port}"])
        self._spawn_beat()
        self._wait_ready([self.url], "web")
        return self

    def _collectstatic(self) -> None:
        """The static files the web instances serve: collected once per test process
        (about 8 s each time) unless a test gives its own STATIC_ROOT."""
        global _collected_static
        if self.env["STATIC_ROOT"] != str(self.tmp / "static"):  # the test's own
            _collect(self.env, Path(self.env["STATIC_ROOT"]))
            return
        if _collected_static is None:
            target = Path(tempfile.mkdtemp(prefix="portal-static-"))
            atexit.register(shutil.rmtree, target, True)
            _collect(self.env, target)
            _collected_static = target
        self.env["STATIC_ROOT"] = str(_collected_static)

    def _spawn_web(self, name: str, port: int, workers: int = 1) -> None:
        """A web server as deploy/Procfile.demo runs it (``workers`` processes; the demo
        runs 2)."""
        self._spawn(
            name,
            [
                str(Path(sys.executable).parent / "gunicorn"),
                "portal.asgi:application",
                "-c",
                "python:portal.gunicorn_conf",
                "-k",
                "uvicorn_worker.UvicornWorker",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                str(workers),
                "--graceful-timeout",
                "2",
            ],
        )

    def _make_certs(self) -> None:
        subprocess.run(
            [sys.executable, "manage.py", "make_dev_certs"],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
            timeout=60,
        )
        tls = Path(settings.TLS_DIR)
        self.cert = tls / "sessions.pem"

    def _spawn_proxy(self, portals: list[str]) -> None:
        # Debian's HAProxy with the portal's configuration, routes pushed by the web
        # and worker processes over its admin socket (proxy/routes.py).
        argv = [sys.executable, "manage.py", "run_proxy", "--workdir", str(self.tmp / "proxy")]
        for portal in portals:
            argv += ["--portal", portal]
        self._spawn("proxy", argv)

    def _spawn_beat(self) -> None:
        self._spawn(
            "beat",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "portal",
                "beat",
                "--loglevel",
                "INFO",
                "--schedule",
                str(self.tmp / "beat-schedule"),
            ],
        )

    def _wait_ready(self, urls: list[str], log: str) -> None:
        """Every URL's sign-in page answers and HAProxy listens, or the stack is stopped."""
        waiting = list(urls)

        def ready() -> bool:
            nonlocal waiting
            waiting = [url for url in waiting if not _answers(f"{url}/accounts/login/")]
            return not waiting and _listening(self.proxy_port)

        try:
            polling.until(ready, 60, "the web servers and HAProxy", interval=0.3)
        except AssertionError as exc:
            self.stop()
            raise RuntimeError(
                f"the web server did not start; see {self.tmp / f'{log}.log'}"
            ) from exc

    def start_worker(self, name: str = "worker") -> None:
        self._spawn(
            name,
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "portal",
                "worker",
                # Its own node name: workers standing in for separate hosts must differ.
                "--hostname",
                f"{name}@%h",
                # No -Q: as `make demo` starts it, it consumes the run's queue, the
                # experiments' own and the webhooks' (settings.CELERY_TASK_QUEUES).
                "--concurrency",
                "2",
                "--without-mingle",
                "--without-gossip",
                "--loglevel",
                "INFO",
            ],
        )

    def stop_worker(self, name: str = "worker") -> None:
        """Stop a Celery worker (queued tasks wait in Redis, as behind a busy queue)."""
        for entry in [p for p in self.procs if p[0] == name]:
            entry[1].terminate()
            entry[1].wait(timeout=30)
            self.procs.remove(entry)

    def stop(self) -> None:
        for _, proc in self.procs:
            proc.terminate()
        for _, proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.procs.clear()

    def exited(self) -> dict[str, int]:
        """The stack's processes that ended by themselves, with their exit codes."""
        return {name: code for name, proc in self.procs if (code := proc.poll()) is not None}

    def logs(self) -> str:
        return "\n".join(
            f"--- {name}\n{(self.tmp / f'{name}.log').read_text()[-3000:]}"
            for name, _ in self.procs
        )


class MultiStack(LiveStack):
    """The portal on several machines, on this one: two web instances (gunicorn + uvicorn)
    on ports of their own standing in for two hosts, two Celery workers with distinct node
    names, one beat, and HAProxy in front carrying the portal's host (``url``) with both
    web instances as health-checked servers, as deploy/ sets it up on real hosts. They
    share exactly what separate hosts would: the database, Redis (broker, cache, locks,
    channel layer), SECRET_KEY and the HAProxy admin socket; nothing else.

    ``web_urls[name]`` reaches one instance directly; ``kill(name)`` SIGKILLs one."""

    WEBS = ("web-a", "web-b")
    WORKERS = ("worker-a", "worker-b")

    def __init__(
        self, tmp: Path, sync_interval: float = 1.0, env: dict | None = None, root: Path = ROOT
    ):
        # Plain HTTP through HAProxy (no certificate to trust); locks of a killed worker
        # lapse within 3 s (PORTAL_LOCK_LEASE), so the survivor takes over its syncs.
        extra = {"PROXY_SESSION_SCHEME": "http", "PORTAL_LOCK_LEASE": "3", **(env or {})}
        super().__init__(tmp, sync_interval, env=extra, root=root)
        self.web_ports = {name: free_port() for name in self.WEBS}
        self.web_urls = {name: f"http://127.0.0.1:{p}" for name, p in self.web_ports.items()}
        # The public URL is HAProxy's: job links, e-mails and the in-job metrics client
        # go through it, as they would to the portal's name on real hosts.
        self.url = f"http://127.0.0.1:{self.proxy_port}"
        self.env["PORTAL_URL"] = self.url
        self.admin = f"unix:{tmp / 'proxy' / 'admin.sock'}"

    def start(self) -> MultiStack:
        # Workers and beat need no static files: they start while they are collected.
        for name in self.WORKERS:
            self.start_worker(name)
        self._spawn_beat()
        self._collectstatic()
        for name, port in self.web_ports.items():
            self._spawn_web(name, port)
        self._spawn_proxy([f"127.0.0.1:{port}" for port in self.web_ports.values()])
        self._wait_ready([*self.web_urls.values(), self.url], self.WEBS[0])
        self.cert = Path(settings.TLS_DIR) / "sessions.pem"
        return self

    def _haproxy(self, command: str) -> str:
        from proxy.haproxy import RuntimeAPI

        return RuntimeAPI(self.admin, self.env["PROXY_MAP_PATH"]).command(command)

    def set_server_state(self, web: str, state: str) -> None:
        """Put web instance ``web`` in HAProxy's ``maint`` (no new connection goes to it)
        or back to ``ready``."""
        assert state in ("maint", "ready")
        self._haproxy(f"set server be_portal/{self.server_of(web)} state {state}")

    def portal_servers(self) -> dict[str, bool]:
        """HAProxy's view of the web instances: server name -> up (its health checks)."""
        answer = self._haproxy("show servers state be_portal")
        servers = {}
        for line in answer.splitlines():
            parts = line.split()
            # "<be_id> be_portal <srv_id> <srv_name> <srv_addr> <srv_op_state> ...": 2 = running
            if len(parts) > 5 and parts[1] == "be_portal":
                servers[parts[3]] = parts[5] == "2"
        return servers

    def server_of(self, web: str) -> str:
        """HAProxy's server name for web instance ``web`` (portal1, portal2 ... in order)."""
        return f"portal{self.WEBS.index(web) + 1}"


class Redis:
    """A Redis of the test's own that can be killed and come back empty. With a password,
    like the portal's: the dev cluster's jobs run on this machine (its config is read from
    stdin, so the password is on no command line)."""

    def __init__(self, tmp: Path):
        self.port, self.tmp, self.proc = free_port(), tmp, None
        self.password = secrets.token_hex(16)
        self.url = f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def start(self) -> None:
        config = [f"port {self.port}", "bind 127.0.0.1", f"requirepass {self.password}"]
        config += ['save ""', "appendonly no", f'dir "{self.tmp}"']
        self.proc = subprocess.Popen(
            [shutil.which("redis-server") or "/usr/bin/redis-server", "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.proc.stdin.write("\n".join(config).encode() + b"\n")
        self.proc.stdin.close()
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        polling.until(
            client.ping,
            10,
            "redis-server to start",
            interval=0.05,
            ignoring=(redis.ConnectionError,),
        )

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
