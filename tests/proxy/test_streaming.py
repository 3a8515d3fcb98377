"""A large download passes through the proxy process without being held whole in memory."""

import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from proxy.codes import COOKIE_NAME, make_cookie
from proxy.models import Session
from tests.livestack import ROOT, _listening, database_url, free_port

pytestmark = pytest.mark.django_db(transaction=True)

SIZE = 256 * 1024 * 1024
CHUNK = b"x" * (1024 * 1024)


class BigFile(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(SIZE))
        self.end_headers()
        for _ in range(SIZE // len(CHUNK)):
            self.wfile.write(CHUNK)

    def log_message(self, *args):
        pass


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))


def test_a_256_mib_download_streams_through_the_proxy(owner, running_notebook, tmp_path):
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), BigFile)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    session = Session.for_job(running_notebook)
    session.mark_ready("127.0.0.1", upstream.server_address[1], "t" * 32)

    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "PORTAL_DEMO": "1",
        "SESSION_SCHEME": "http",
        "SESSION_PUBLIC_PORT": str(port),
    }
    proxy = subprocess.Popen(
        [
            os.path.join(os.path.dirname(sys.executable), "uvicorn"),
            "proxy.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=open(tmp_path / "proxy.log", "w"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while not _listening(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        baseline = rss_kib(proxy.pid)
        peak = [baseline]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], rss_kib(proxy.pid))
                time.sleep(0.05)

        threading.Thread(target=sample, daemon=True).start()
        received = 0
        headers = {
            "host": f"{session.public_id}.sessions.localhost:{port}",
            "cookie": f"{COOKIE_NAME}={make_cookie(session.public_id, owner.pk)}",
        }
        with httpx.stream(
            "GET", f"http://127.0.0.1:{port}/files/big.bin", headers=headers, timeout=60
        ) as response:
            assert response.status_code == 200
            for chunk in response.iter_raw():
                received += len(chunk)
                time.sleep(0.0005 * (received < 32 * 1024 * 1024))  # a slow reader at first
        done.set()
        assert received == SIZE
        growth_mib = (peak[0] - baseline) / 1024
        assert growth_mib < 48, f"the proxy grew by {growth_mib:.0f} MiB while passing 256 MiB"
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)
        upstream.shutdown()
