"""deploy/redis.sh, the portal's own Redis for `make demo`/`make test`: a local impostor
listening first on its port is never taken for it and never hears its password."""

import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from tests.livestack import ROOT, free_port

pytestmark = pytest.mark.skipif(
    not Path("/usr/bin/redis-server").exists(), reason="needs Debian's redis-server"
)


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


def test_an_impostor_on_the_port_is_neither_taken_nor_told_the_password(tmp_path):
    port = free_port()
    impostor = Impostor(port)
    env = {**os.environ, "PORTAL_DATA_DIR": str(tmp_path / "var"), "PORTAL_REDIS_PORT": str(port)}
    try:
        up = subprocess.run(
            ["bash", "deploy/redis.sh"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert up.returncode == 0, up.stdout + up.stderr
        password = (tmp_path / "var" / "redis.password").read_text().strip()
        url = (tmp_path / "var" / "redis.url").read_text().strip()
        assert f"@127.0.0.1:{port}/" not in url, (
            f"the impostor was taken for the portal's Redis: {up.stdout}"
        )
        assert not any(password.encode() in data for data in impostor.heard)
        ours = int(url.rsplit(":", 1)[1].split("/")[0])
        pid = int((tmp_path / "var" / "redis" / "redis.pid").read_text())
        listening = subprocess.run(
            ["ss", "-Hltnp", f"sport = :{ours}"], capture_output=True, text=True
        ).stdout
        assert f"pid={pid}," in listening
    finally:
        subprocess.run(["bash", "deploy/redis.sh", "stop"], cwd=ROOT, env=env, timeout=30)
        impostor.close()
