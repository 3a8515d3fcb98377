"""Large bodies stream through HAProxy in both directions without being held whole."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from proxy.codes import cookie_name, make_cookie
from proxy.models import SessionLink

pytestmark = pytest.mark.django_db(transaction=True)

SIZE = 256 * 1024 * 1024
CHUNK = b"x" * (1024 * 1024)


class BigFiles(BaseHTTPRequestHandler):
    """GET: SIZE bytes; PUT: counts the body it receives and answers the count."""

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(SIZE))
        self.end_headers()
        for _ in range(SIZE // len(CHUNK)):
            self.wfile.write(CHUNK)

    def do_PUT(self):  # noqa: N802
        left, seen = int(self.headers["Content-Length"]), 0
        while left:
            chunk = self.rfile.read(min(left, 1 << 20))
            if not chunk:
                break
            seen += len(chunk)
            left -= len(chunk)
        body = str(seen).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as fh:
            total += next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
    return total


def haproxy_pids(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [master, *map(int, children)]


class Peak:
    """HAProxy's resident memory (master and worker), sampled while a transfer runs."""

    def __init__(self, pids: list[int]):
        self.pids = pids
        self.baseline = self.peak = rss_kib(pids)
        self.done = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, rss_kib(self.pids))
            time.sleep(0.05)

    def growth_mib(self) -> float:
        self.done.set()
        return (self.peak - self.baseline) / 1024


@pytest.fixture
def big_files(owner, running_notebook, proxy):
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), BigFiles)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    session = SessionLink.for_job(running_notebook)
    session.mark_ready("127.0.0.1", upstream.server_address[1], "t" * 32)  # pushed to HAProxy
    headers = {
        "host": f"{session.public_id}.sessions.localhost:{proxy.port}",
        "cookie": f"{cookie_name()}={make_cookie(session.public_id, owner.pk)}",
    }
    yield f"http://127.0.0.1:{proxy.port}/files/big.bin", headers
    upstream.shutdown()


def test_a_256_mib_download_streams_through_haproxy(proxy, big_files):
    url, headers = big_files
    memory = Peak(haproxy_pids(proxy.proc.pid))
    received = 0
    with httpx.stream("GET", url, headers=headers, timeout=60) as response:
        assert response.status_code == 200
        for chunk in response.iter_raw():
            received += len(chunk)
            time.sleep(0.0005 * (received < 32 * 1024 * 1024))  # a slow reader at first
    growth = memory.growth_mib()
    assert received == SIZE
    assert growth < 16, f"HAProxy grew by {growth:.0f} MiB while passing 256 MiB"


def test_a_256_mib_upload_streams_through_haproxy(proxy, big_files):
    url, headers = big_files
    memory = Peak(haproxy_pids(proxy.proc.pid))

    def body():
        for _ in range(SIZE // len(CHUNK)):
            yield CHUNK

    response = httpx.put(
        url, content=body(), headers={**headers, "content-length": str(SIZE)}, timeout=60
    )
    growth = memory.growth_mib()
    assert response.status_code == 200 and response.text == str(SIZE)
    assert growth < 16, f"HAProxy grew by {growth:.0f} MiB while passing 256 MiB"
