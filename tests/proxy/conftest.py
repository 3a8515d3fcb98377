"""Fixtures of the session data path: HAProxy instances and stand-in notebooks."""

import pytest

from proxy.models import SessionLink
from tests.livestack import free_port
from tests.proxystack import TOKEN, Proxy, need_haproxy, start_echo


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


# --- through HAProxy, routes pushed by the portal -----------------------------------
# The portal (pytest-django's live server) answers /_portal/login behind HAProxy; every
# route is pushed by the control plane (proxy/routes.py), never added by hand.


@pytest.fixture
def notebook_job(running_notebook):
    return running_notebook


@pytest.fixture
def session(notebook_job):
    return SessionLink.for_job(notebook_job)


@pytest.fixture
def data_path(tmp_path, settings, live_server):
    """HAProxy in front of the live portal; the portal's control plane drives it."""
    need_haproxy()
    port = live_server.url.rsplit(":", 1)[1]
    proxy = Proxy(
        tmp_path, settings, portal=f"127.0.0.1:{port}", portal_url=live_server.url
    ).start()
    settings.PROXY_INSTANCES = [proxy.admin]
    yield proxy
    proxy.stop()


@pytest.fixture
def echo():
    port = free_port()
    proc = start_echo(port)
    yield port
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def ready(session, echo, data_path):
    assert session.mark_ready("127.0.0.1", echo, TOKEN)
    return session
