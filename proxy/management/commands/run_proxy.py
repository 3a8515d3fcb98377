"""Run HAProxy for session links in the foreground (make demo, the live test stack).

Renders the configuration from the settings into DATA_DIR/proxy/, starts Debian's
haproxy as a child (master-worker, no daemon), gives it every open session's route as
soon as its admin socket answers, and stops it on SIGTERM/SIGINT. In production HAProxy
runs under systemd with a config from ``render_proxy_config`` (deploy/haproxy/).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from proxy import routes
from proxy.haproxy import HAProxyError, RuntimeAPI, render_config


def combined_pem(tls_dir: Path, into: Path) -> Path:
    """HAProxy wants the chain and the key in one file (readable by the portal only)."""
    pem = into / "sessions-combined.pem"
    pem.touch(mode=0o600)
    pem.write_bytes(
        (tls_dir / "sessions.pem").read_bytes() + (tls_dir / "sessions-key.pem").read_bytes()
    )
    return pem


def own_workdir(work: Path) -> int:
    """Lock ``work`` for this process before anything in it is touched, or refuse: a second
    `make demo` or run_proxy on the same data directory would otherwise unlink the running
    HAProxy's admin socket and rewrite its configuration, and the first stack's sessions
    would never get a route again. The lock goes with the process, however it ends."""
    work.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(work / "run_proxy.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise CommandError(
            f"{work} belongs to a running run_proxy (PID {holder}): stop that stack first "
            "(Ctrl-C where `make demo` runs), or give this one its own PORTAL_DATA_DIR. "
            "Nothing was changed."
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


class Command(BaseCommand):
    help = "Run HAProxy for session links in the foreground (dev and tests)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--bind",
            default=None,
            help="address:port (default 127.0.0.1:PROXY_SESSION_PUBLIC_PORT)",
        )
        parser.add_argument(
            "--workdir",
            default=None,
            help="where its config, PID and TLS file go (default DATA_DIR/proxy)",
        )
        parser.add_argument(
            "--portal",
            action="append",
            default=None,
            help="host:port of a portal web server (default: PORTAL_URL's); "
            "repeat it for every instance",
        )

    def handle(self, *args, **options):
        haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
        if not Path(haproxy).exists():
            raise CommandError("haproxy is missing: `make services` installs Debian's haproxy")
        work = Path(options["workdir"] or Path(settings.DATA_DIR) / "proxy")
        # First: nothing is touched while another owns it. What a second run would break is
        # the running HAProxy's admin socket (and the map beside it), wherever --workdir is.
        admin = settings.PROXY_INSTANCES[0]
        owned = Path(admin[5:]).parent if admin.startswith("unix:") else work
        self.locks = [own_workdir(owned)]
        if work.resolve() != owned.resolve():
            self.locks.append(own_workdir(work))
        Path(settings.PROXY_MAP_PATH).parent.mkdir(parents=True, exist_ok=True)
        Path(settings.PROXY_MAP_PATH).write_text("")  # routes come over the admin socket
        bind = options["bind"] or f"127.0.0.1:{settings.PROXY_SESSION_PUBLIC_PORT or 443}"
        portal = options["portal"]
        if not portal:
            # PORTAL_URL's host as an address: "localhost" may resolve to ::1 first,
            # where the web server (bound to 127.0.0.1) does not listen.
            url = urlsplit(settings.PORTAL_URL)
            address = routes.resolve(url.hostname or "localhost")
            if address is None:
                raise CommandError(f"{url.hostname} (PORTAL_URL) does not resolve: give --portal")
            portal = [f"{address}:{url.port or (443 if url.scheme == 'https' else 80)}"]
        tls = None
        if settings.PROXY_SESSION_SCHEME == "https":
            tls = str(combined_pem(Path(settings.TLS_DIR), work))
        config = work / "haproxy.cfg"
        try:
            config.write_text(render_config(bind=bind, tls_pem=tls, portal_upstream=portal))
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        # Arguments are a fixed binary and a file this command wrote: no user input.
        check = subprocess.run(  # noqa: S603
            [haproxy, "-c", "-q", "-f", str(config)], capture_output=True
        )
        if check.returncode:
            raise CommandError(f"HAProxy refuses {config}: {check.stderr.decode().strip()}")
        if admin.startswith("unix:"):
            Path(admin[5:]).unlink(missing_ok=True)
        stopping = []
        proc = None

        def stop(signum, frame):
            stopping.append(signum)
            if proc is not None:
                proc.send_signal(signal.SIGTERM)

        # Before HAProxy starts, so a stop that comes early still reaches it.
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        proc = subprocess.Popen([haproxy, "-W", "-db", "-f", str(config)])  # noqa: S603
        if stopping:
            proc.send_signal(signal.SIGTERM)
        (work / "haproxy.pid").write_text(f"{proc.pid}\n")
        self.stdout.write(f"HAProxy {proc.pid} on {bind} ({settings.PROXY_SESSION_SCHEME})")
        api = RuntimeAPI(admin, settings.PROXY_MAP_PATH)
        deadline = time.monotonic() + 15
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                api.command("show info")
                break
            except HAProxyError:
                time.sleep(0.1)
        if proc.poll() is None:
            try:
                self.stdout.write(f"routes reconciled: {routes.reconcile()}")
            except Exception as exc:  # noqa: BLE001 - beat's next reconcile does it
                self.stderr.write(f"routes not reconciled yet ({exc}); beat will")
        sys.exit(proc.wait())
