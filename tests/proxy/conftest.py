"""Fixtures of the session data path: HAProxy instances and stand-in notebooks."""

import pytest

from tests.livestack import free_port
from tests.proxystack import Proxy, need_haproxy, start_echo


@pytest.fixture
def upstreams():
    """Two stand-in notebooks: port by name."""
    ports = {"A": free_port(), "B": free_port()}
    procs = [start_echo(port) for port in ports.values()]
    try:
        yield ports
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


@pytest.fixture
def proxy(tmp_path, settings):
    """One HAProxy instance; the portal's control plane pushes its routes to it."""
    need_haproxy()
    started = Proxy(tmp_path, settings).start()
    settings.PROXY_INSTANCES = [started.admin]
    yield started
    started.stop()
