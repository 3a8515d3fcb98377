"""Loopback helpers shared by the bench scripts (importable as they run from bench/)."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # run from bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devtools.ports import free_port  # noqa: E402

__all__ = ["free_port", "wait_port"]


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")
