"""The port picker never hands out a port a browser refuses to load."""

from __future__ import annotations

import socket

from devtools import ports


def test_a_blocked_port_from_the_kernel_is_skipped(monkeypatch):
    handed = iter([6667, 6000, 41234])
    real_socket = socket.socket

    class Scripted(real_socket):
        def getsockname(self):
            return ("127.0.0.1", self._port)

        def bind(self, address):
            self._port = next(handed)

    monkeypatch.setattr(ports.socket, "socket", Scripted)
    assert ports.free_port() == 41234


def test_the_port_is_free_and_not_blocked():
    port = ports.free_port()
    assert port not in ports.BROWSER_BLOCKED_PORTS
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
