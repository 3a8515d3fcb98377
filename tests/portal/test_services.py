"""deploy/redis.sh, the portal's own Redis for `make demo`/`make test`, run for real in a
copy of the checkout: dev-cluster jobs run on the same machine, so it must refuse anyone
without its password, keep that password private, and never take over a Redis that has none."""

import os
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest
import redis

from tests import polling
from tests.livestack import free_port

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    not (shutil.which("redis-server") and shutil.which("redis-cli")),
    reason="redis-server is not installed (deploy/services.sh installs it as root)",
)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.fixture
def checkout(tmp_path):
    (tmp_path / "deploy").mkdir()
    shutil.copy(ROOT / "deploy" / "redis.sh", tmp_path / "deploy" / "redis.sh")
    yield tmp_path
    subprocess.run(["bash", str(tmp_path / "deploy" / "redis.sh"), "stop"], timeout=30)


@pytest.fixture
def stranger(tmp_path):
    """A Redis without a password (like the machine's shared one) on the first port tried."""
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        + ["--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port, socket_connect_timeout=0.5)
    polling.until(
        client.ping, 10, "redis-server to start", interval=0.05, ignoring=(redis.ConnectionError,)
    )
    yield port
    proc.kill()
    proc.wait(timeout=10)


def run_script(checkout: Path, port: int) -> subprocess.CompletedProcess:
    result = subprocess.run(
        ["bash", str(checkout / "deploy" / "redis.sh")],
        env={**os.environ, "PORTAL_REDIS_PORT": str(port)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_the_portals_redis_is_its_own_private_and_refuses_strangers(checkout, stranger):
    run_script(checkout, stranger)
    var = checkout / "var"
    password = (var / "redis.password").read_text().strip()
    url = (var / "redis.url").read_text().strip()
    parsed = redis.connection.parse_url(url)
    # Not the passwordless Redis on the first port (a password "opens" that one too).
    assert parsed["port"] != stranger and parsed["password"] == password
    assert len(password) >= 32
    assert redis.Redis(port=stranger).config_get("requirepass")["requirepass"] == ""

    # Anyone on the machine (a job) reaches the port, but nothing works without the password.
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=parsed["port"]).ping()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=parsed["port"]).set("portal:x", b"forged")
    assert redis.Redis.from_url(url).ping()

    # The password is in private files only, never on a command line (`ps` shows those).
    assert mode(var) == 0o700 and mode(var / "redis") == 0o700
    for name in ("redis.password", "redis.url", "redis/redis.conf"):
        assert mode(var / name) == 0o600, name
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            assert password.encode() not in cmdline.read_bytes(), cmdline
        except OSError:  # the process has gone
            pass

    # Idempotent: a second run finds its Redis (the password opens it) and starts nothing.
    pid = (var / "redis" / "redis.pid").read_text().strip()
    again = run_script(checkout, stranger)
    assert "starting" not in again.stdout
    assert (var / "redis.url").read_text().strip() == url
    assert (var / "redis" / "redis.pid").read_text().strip() == pid

    subprocess.run(["bash", str(checkout / "deploy" / "redis.sh"), "stop"], timeout=30, check=True)
    assert not Path(f"/proc/{pid}").exists()


def test_a_port_that_is_some_connections_local_end_is_skipped(checkout):
    """Nothing listens on it, so it looks free, but a socket holds it (as an outgoing
    connection's local port does) and Redis cannot bind it: the next port is taken.
    Before, the script stopped with 'did not come up' (seen in CI)."""
    import socket

    held = socket.socket()
    held.bind(("127.0.0.1", 0))  # bound, not listening
    port = held.getsockname()[1]
    try:
        result = run_script(checkout, port)
        assert f"127.0.0.1:{port} is in use after all" in result.stdout
        url = (checkout / "var" / "redis.url").read_text().strip()
        assert redis.connection.parse_url(url)["port"] > port
        assert redis.Redis.from_url(url).ping()
    finally:
        held.close()


class Impostor:
    """A server that answers like a password-protected Redis: NOAUTH, then PONG to any
    password, which it keeps (as any local user, a job on the dev node, could)."""

    def __init__(self, port: int):
        self.heard: list[bytes] = []
        self.server = socket.create_server(("127.0.0.1", port))
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self.talk, args=(conn,), daemon=True).start()

    def talk(self, conn: socket.socket) -> None:
        authed = False
        with conn:
            while data := conn.recv(4096):
                self.heard.append(data)
                if b"AUTH" in data.upper():
                    authed = True
                    conn.sendall(b"+OK\r\n")
                elif b"PING" in data.upper():
                    conn.sendall(
                        b"+PONG\r\n" if authed else b"-NOAUTH Authentication required.\r\n"
                    )
                else:
                    conn.sendall(b"+OK\r\n")

    def close(self) -> None:
        self.server.close()


def test_an_impostor_on_the_port_is_neither_taken_nor_told_the_password(checkout):
    """Any local user (a job on the dev node) may listen first on the port and answer like a
    password-protected Redis; the password goes only to the redis-server of our pidfile."""
    port = free_port()
    impostor = Impostor(port)
    try:
        up = run_script(checkout, port)
        assert up.returncode == 0, up.stdout + up.stderr
        var = checkout / "var"
        password = (var / "redis.password").read_text().strip()
        url = (var / "redis.url").read_text().strip()
        assert f"@127.0.0.1:{port}/" not in url, f"the impostor was taken for ours: {up.stdout}"
        assert not any(password.encode() in data for data in impostor.heard)
        ours = int(url.rsplit(":", 1)[1].split("/")[0])
        pid = int((var / "redis" / "redis.pid").read_text())
        listening = subprocess.run(
            ["ss", "-Hltnp", f"sport = :{ours}"], capture_output=True, text=True
        ).stdout
        assert f"pid={pid}," in listening
    finally:
        impostor.close()


def test_the_test_databases_role_has_a_random_password_kept_in_var():
    """The dev cluster's jobs reach 127.0.0.1:5432 too: no well-known password."""
    env_file = ROOT / "var" / "services.env"
    if "PORTAL_TEST_DATABASE_URL" not in (env_file.read_text() if env_file.exists() else ""):
        pytest.skip("no PostgreSQL for tests here (deploy/services.sh)")
    kept = ROOT / "var" / "postgres.password"
    password = kept.read_text().strip()
    assert mode(kept) == 0o600 and len(password) >= 32
    assert f"postgres://portal:{password}@" in env_file.read_text()
