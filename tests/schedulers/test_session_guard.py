"""The session guard (schedulers/on_node/session_guard.py) as it runs on a node: the node's
python3, a real app behind it on a Unix socket, plain sockets in front as HAProxy (or a
stranger on the node) would connect."""

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from devtools.ports import free_port
from tests.polling import until

GUARD = Path(__file__).resolve().parents[2] / "schedulers" / "on_node" / "session_guard.py"
SECRET = "s3cret-token-of-the-session-0123456789"

# The app: answers each request with the head it received (keep-alive), and after an
# Upgrade echoes bytes upper-cased; counts its connections in a file.
APP = textwrap.dedent(
    """
    import asyncio, sys
    path, count = sys.argv[1], sys.argv[2]
    async def handle(reader, writer):
        with open(count, "a") as fh:
            fh.write("x")
        while True:
            try:
                head = await reader.readuntil(b"\\r\\n\\r\\n")
            except Exception:
                break
            if b"upgrade: websocket" in head.lower():
                writer.write(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\n\\r\\n")
                while True:
                    data = await reader.read(65536)
                    if not data:
                        break
                    writer.write(data.upper())
                    await writer.drain()
                break
            writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n" % len(head) + head)
            await writer.drain()
        writer.close()
    async def main():
        server = await asyncio.start_unix_server(handle, path)
        async with server:
            await server.serve_forever()
    asyncio.run(main())
    """
)


@pytest.fixture
def guarded(tmp_path):
    sock, count = tmp_path / "app.sock", tmp_path / "connections"
    count.write_text("")
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "PORTAL_SESSION_TOKEN": SECRET}
    app = subprocess.Popen([sys.executable, "-c", APP, str(sock), str(count)])
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    guard = subprocess.Popen(
        [python, str(GUARD), "--port", str(port), "--host", "127.0.0.1"]
        + ["--upstream", f"unix:{sock}", "--head-seconds", "2"],
        env=env,
    )

    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0 and sock.exists()

    until(listening, 20, "the guard and its app")
    yield {"port": port, "connections": count, "pid": guard.pid}
    guard.terminate()
    app.terminate()
    guard.wait(10)
    app.wait(10)


def request(path: str = "/", token: str | None = SECRET, extra: str = "") -> bytes:
    auth = f"Authorization: token {token}\r\n" if token is not None else ""
    return f"GET {path} HTTP/1.1\r\nHost: s.example\r\n{auth}{extra}\r\n".encode()


def exchange(port: int, data: bytes, timeout: float = 5) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(data)
        received = b""
        try:
            while chunk := conn.recv(65536):
                received += chunk
                if b"\r\n\r\n" in received and (
                    b"403" in received.split(b"\r\n")[0] or received.count(b"HTTP/1.1 200") >= 1
                ):
                    head, _, body = received.partition(b"\r\n\r\n")
                    length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
                    if len(body) >= length:
                        break
        except TimeoutError:
            pass
        return received


@pytest.mark.parametrize(
    "data",
    [
        request(token=None),
        request(token="wrong-token-wrong-token-wrong"),
        request(extra=f"Authorization: token {SECRET}\r\n"),  # twice
        request(token=None, extra=f"X-A: b\r\n Authorization: token {SECRET}\r\n"),  # folded
    ],
    ids=["none", "wrong", "repeated", "folded"],
)
def test_a_request_without_the_sessions_secret_never_reaches_the_app(guarded, data):
    answer = exchange(guarded["port"], data)
    assert answer.startswith(b"HTTP/1.1 403 Forbidden")
    assert guarded["connections"].read_text() == ""


def test_the_secret_opens_the_connection_and_never_reaches_the_app(guarded):
    answer = exchange(guarded["port"], request("/edit?file=a"))
    assert answer.startswith(b"HTTP/1.1 200 OK")
    assert b"GET /edit?file=a HTTP/1.1" in answer and b"Host: s.example" in answer
    assert b"Authorization" not in answer and SECRET.encode() not in answer


def test_keep_alive_requests_and_a_websocket_go_through_the_checked_connection(guarded):
    with socket.create_connection(("127.0.0.1", guarded["port"]), timeout=5) as conn:
        conn.sendall(request("/one"))
        first = conn.recv(65536)
        assert b"GET /one" in first
        conn.sendall(request("/two", token=None))  # HAProxy adds it; the app answers anyway
        assert b"GET /two" in conn.recv(65536)
        conn.sendall(request("/socket", extra="Upgrade: websocket\r\nConnection: Upgrade\r\n"))
        assert conn.recv(65536).startswith(b"HTTP/1.1 101")
        conn.sendall(b"typing in the terminal")
        echoed = b""
        while len(echoed) < 22:
            echoed += conn.recv(65536)
        assert echoed == b"TYPING IN THE TERMINAL"
    assert guarded["connections"].read_text() == "x"


def test_an_oversized_or_slow_head_is_dropped_unread(guarded):
    huge = request(extra="X-Big: " + "a" * 70_000 + "\r\n")
    assert not exchange(guarded["port"], huge).startswith(b"HTTP/1.1 200")
    with socket.create_connection(("127.0.0.1", guarded["port"]), timeout=10) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # never finished
        assert conn.recv(100) == b""  # closed after --head-seconds
    assert guarded["connections"].read_text() == ""


def test_the_secret_is_not_on_the_guards_command_line(guarded):
    cmdline = Path(f"/proc/{guarded['pid']}/cmdline").read_bytes()
    assert SECRET.encode() not in cmdline
    environ = os.environ.get("PORTAL_SESSION_TOKEN")
    assert environ is None  # (the test process never had it)


def test_a_missing_secret_stops_the_guard_at_once(tmp_path):
    ran = subprocess.run(
        [sys.executable, str(GUARD), "--port", "1", "--upstream", "unix:/x"],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ran.returncode == 2 and "PORTAL_SESSION_TOKEN" in ran.stderr


def test_with_a_ready_path_the_port_opens_only_once_the_app_answers(tmp_path):
    sock, count = tmp_path / "app.sock", tmp_path / "connections"
    count.write_text("")
    port = free_port()
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    guard = subprocess.Popen(
        [python, str(GUARD), "--port", str(port), "--host", "127.0.0.1"]
        + ["--upstream", f"unix:{sock}", "--ready-path", "/healthz"],
        env={"PATH": "/usr/bin:/bin", "PORTAL_SESSION_TOKEN": SECRET},
    )
    app = None
    try:
        with socket.socket() as s:  # the app is not there: nothing listens on the port
            assert s.connect_ex(("127.0.0.1", port)) != 0
        app = subprocess.Popen([sys.executable, "-c", APP, str(sock), str(count)])

        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        until(listening, 20, "the guard's port once the app answers")
        assert count.read_text()  # it asked the app before it listened
        assert b"GET / HTTP/1.1" in exchange(port, request())
    finally:
        guard.terminate()
        guard.wait(10)
        if app is not None:
            app.terminate()
            app.wait(10)


def test_an_app_that_never_gets_ready_stops_the_guard(tmp_path):
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    done = subprocess.run(
        [python, str(GUARD), "--port", str(free_port()), "--host", "127.0.0.1"]
        + ["--upstream", f"unix:{tmp_path}/none.sock", "--ready-path", "/healthz"]
        + ["--ready-seconds", "1"],
        env={"PATH": "/usr/bin:/bin", "PORTAL_SESSION_TOKEN": SECRET},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 3 and "did not answer /healthz" in done.stderr


@pytest.mark.parametrize(
    ("status", "wanted", "ok"),
    [
        (200, "200-399", True),
        (302, "200-399", True),
        (404, "200-399", False),
        (302, "200", False),
        (302, "200,302", True),
        (503, "200-399", False),
    ],
)
def test_ready_statuses(status, wanted, ok):
    sys.path.insert(0, str(GUARD.parent))
    try:
        import session_guard
    finally:
        sys.path.pop(0)
    assert session_guard.status_ok(status, wanted) is ok


def _guard(port: int, *args: str) -> subprocess.Popen:
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    return subprocess.Popen(
        [python, str(GUARD), "--port", str(port), "--host", "127.0.0.1", *args],
        env={"PATH": "/usr/bin:/bin", "PORTAL_SESSION_TOKEN": SECRET},
    )


def test_the_app_it_starts_never_sees_the_secret_and_its_end_is_the_guards(tmp_path):
    seen = tmp_path / "seen"
    app = "import os, sys; open(sys.argv[1], 'w').write(os.environ.get('PORTAL_SESSION_TOKEN', 'absent')); sys.exit(7)"
    guard = _guard(
        free_port(), "--upstream", "127.0.0.1:9", "--", sys.executable, "-c", app, str(seen)
    )
    assert guard.wait(30) == 7
    assert seen.read_text() == "absent"


def test_stopping_the_guard_stops_the_app_it_started(tmp_path):
    sock, count = tmp_path / "app.sock", tmp_path / "connections"
    count.write_text("")
    port = free_port()
    guard = _guard(
        port,
        "--upstream",
        f"unix:{sock}",
        "--ready-path",
        "/",
        "--",
        sys.executable,
        "-c",
        APP,
        str(sock),
        str(count),
    )

    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    until(listening, 20, "the guard once its app answers")
    assert b"GET / HTTP/1.1" in exchange(port, request())
    guard.terminate()
    assert guard.wait(20) == 0

    def app_gone() -> bool:
        with socket.socket(socket.AF_UNIX) as s:
            return s.connect_ex(str(sock)) != 0

    until(app_gone, 20, "the app stopped with its guard")
