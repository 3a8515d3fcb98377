"""The whole stack as separate processes on the test database, as `make demo` runs it:
gunicorn with the uvicorn worker (HTTP + websockets), a Celery worker and Celery beat."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import redis
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]


def database_url() -> str:
    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    return f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


class LiveStack:
    def __init__(self, tmp: Path, sync_interval: float = 1.0, env: dict | None = None):
        self.tmp = tmp
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
            **(env or {}),
        }
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.argv: dict[str, list[str]] = {}

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.tmp / f"{name}.log", "a")  # noqa: SIM115 - closed with the process
        # Its own process group, so kill() reaches a worker's pool processes too.
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=self.env,
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

    def restart(self, name: str, *, hard: bool = False) -> None:
        """Stop a process (SIGTERM and wait, or kill()) and start it again as it was."""
        if hard:
            self.kill(name)
        else:
            for entry in [p for p in self.procs if p[0] == name]:
                entry[1].terminate()
                entry[1].wait(timeout=30)
                self.procs.remove(entry)
        self._spawn(name, self.argv[name])

    def start(self) -> LiveStack:
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
            cwd=ROOT,
            env=self.env,
            check=True,
            timeout=120,
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
                "1",
                "--graceful-timeout",
                "2",
            ],
        )
        self.start_worker()
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
        # Debian's HAProxy with the portal's configuration, routes pushed by the web
        # and worker processes over its admin socket (proxy/routes.py).
        self._spawn(
            "proxy",
            [
                sys.executable,
                "manage.py",
                "run_proxy",
                "--workdir",
                str(self.tmp / "proxy"),
                "--portal",
                f"127.0.0.1:{self.port}",
            ],
        )
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
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/accounts/login/", timeout=2) as response:
                    if response.status == 200 and _listening(self.proxy_port):
                        return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the web server did not start; see {self.tmp / 'web.log'}")

    def start_worker(self) -> None:
        self._spawn(
            "worker",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "portal",
                "worker",
                # No -Q: as `make demo` starts it, it consumes the run's queue and the
                # experiments' own (settings.CELERY_TASK_QUEUES).
                "--concurrency",
                "2",
                "--without-mingle",
                "--without-gossip",
                "--loglevel",
                "INFO",
            ],
        )

    def stop_worker(self) -> None:
        """Stop the Celery worker (queued tasks wait in Redis, as behind a busy queue)."""
        for name, proc in [p for p in self.procs if p[0] == "worker"]:
            proc.terminate()
            proc.wait(timeout=30)
            self.procs.remove((name, proc))

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
        for _ in range(100):
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
