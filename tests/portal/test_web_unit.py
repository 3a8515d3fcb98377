"""The web server as the deploy units start it (deploy/systemd/portal-web@.service, the
demo's Procfile): behind a remote HAProxy each client keeps its own address, because the
units pass FORWARDED_ALLOW_IPS (HAProxy's addresses) to gunicorn/uvicorn; otherwise every
client had HAProxy's address and one client's failed sign-ins locked everyone out."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests import polling
from tests.livestack import ROOT, _collect, database_url, free_port

UNIT = ROOT / "deploy" / "systemd" / "portal-web@.service"
ENV_EXAMPLE = ROOT / "deploy" / "systemd" / "portal.env.example"
PROCFILE = ROOT / "deploy" / "Procfile.demo"


def unit_lines() -> list[str]:
    """The unit's lines with continuations joined, comments left out."""
    text = re.sub(r"\\\n\s*", " ", UNIT.read_text())
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def unit_environment() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in unit_lines():
        if line.startswith("Environment="):
            found.update(item.split("=", 1) for item in line.removeprefix("Environment=").split())
    return found


def rendered_command(port: int, portal_env: dict[str, str]) -> list[str]:
    """ExecStart as systemd runs it for portal-web@PORT: the unit's Environment= overridden
    by the EnvironmentFile (``portal_env``), ${NAME} expanded, in this checkout's venv."""
    (line,) = [x for x in unit_lines() if x.startswith("ExecStart=")]
    env = {**unit_environment(), **portal_env}
    command = line.removeprefix("ExecStart=").replace("%i", str(port))
    command = re.sub(r"\$\{([A-Z_]+)\}", lambda m: env[m[1]], command)
    argv = shlex.split(command)
    return [str(Path(sys.executable).parent / Path(argv[0]).name), *argv[1:]]


def test_the_units_give_gunicorn_the_proxies_addresses():
    """Before: no unit, Procfile or example environment said FORWARDED_ALLOW_IPS, so
    uvicorn believed X-Forwarded-For only from 127.0.0.1 (#39)."""
    argv = rendered_command(8000, {"FORWARDED_ALLOW_IPS": "10.0.0.5,10.0.0.6"})
    assert argv[argv.index("--forwarded-allow-ips") + 1] == "10.0.0.5,10.0.0.6"
    # Without the setting: HAProxy on the same host (gunicorn's own default).
    argv = rendered_command(8000, {})
    assert argv[argv.index("--forwarded-allow-ips") + 1] == "127.0.0.1,::1"
    assert re.search(r"^FORWARDED_ALLOW_IPS=\S+", ENV_EXAMPLE.read_text(), re.M)
    web = next(line for line in PROCFILE.read_text().splitlines() if line.startswith("web:"))
    assert "--forwarded-allow-ips ${FORWARDED_ALLOW_IPS:-127.0.0.1,::1}" in web


@pytest.mark.parametrize("value", ["*", "10.0.0.5,not-an-address"])
def test_a_value_that_trusts_anyone_or_is_no_address_stops_the_start(value):
    env = {**os.environ, "PORTAL_DEMO": "1", "FORWARDED_ALLOW_IPS": value}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "portal.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "FORWARDED_ALLOW_IPS:" in result.stderr, result.stderr


HAPROXY = "127.0.0.5"  # the remote HAProxy's address, as the web host sees it


@pytest.fixture
def web(tmp_path):
    """portal-web@PORT started from the unit's own command line, on the test database,
    trusting HAPROXY; one failed sign-in per name (five per address) locks."""
    port = free_port()
    static = tmp_path / "static"
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "PORTAL_DEMO": "1",
        "STATIC_ROOT": str(static),
        "PORTAL_SIGNIN_FAILURES": "1",
        "FORWARDED_ALLOW_IPS": HAPROXY,
    }
    _collect(env, static)
    argv = rendered_command(
        port,
        {"PORTAL_WEB_BIND": "127.0.0.1", "PORTAL_WEB_WORKERS": "1", "FORWARDED_ALLOW_IPS": HAPROXY},
    )
    log = open(tmp_path / "web.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:

        def healthy() -> bool:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    return True
            except httpx.TransportError:
                pass
            assert proc.poll() is None, (tmp_path / "web.log").read_text()
            return False

        polling.until(
            healthy,
            60,
            lambda: f"{url}/healthz to answer 200; {(tmp_path / 'web.log').read_text()}",
            interval=0.2,
        )
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def sign_in_page(url: str, client_address: str, username: str) -> str:
    """A failed sign-in of ``username`` by the client at ``client_address``, carried by
    the remote HAProxy (its connection comes from HAPROXY, with X-Forwarded-For)."""
    transport = httpx.HTTPTransport(local_address=HAPROXY)
    headers = {"X-Forwarded-For": client_address}
    with httpx.Client(transport=transport, headers=headers, timeout=10) as http:
        page = http.get(f"{url}/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token, page.text[:500]
        answer = http.post(
            f"{url}/accounts/login/",
            data={"csrfmiddlewaretoken": token[1], "username": username, "password": "wrong"},
        )
        return answer.text


@pytest.mark.django_db(transaction=True)
def test_behind_a_remote_haproxy_each_client_has_its_own_sign_in_budget(web):
    for n in range(5):  # five names from one address: that address is locked
        assert "Too many failed sign-ins" not in sign_in_page(web, "203.0.113.7", f"a{n}")
    assert "Too many failed sign-ins" in sign_in_page(web, "203.0.113.7", "a5")
    # Another client behind the same HAProxy is not.
    page = sign_in_page(web, "198.51.100.9", "b0")
    assert "Too many failed sign-ins" not in page and "correct username" in page


def test_each_web_instance_keeps_its_openssh_masters_in_a_runtime_directory_of_its_own():
    """clusters/bulk.py writes a master's key there until it has logged in: a 0700
    directory in memory that systemd makes for this instance and removes when it stops."""
    lines = unit_lines()
    assert "RuntimeDirectory=portal-web-%i" in lines and "RuntimeDirectoryMode=0700" in lines
    assert unit_environment()["PORTAL_BULK_SSH_DIR"] == "/run/portal-web-%i"


def test_the_unit_is_started_only_once_readyz_answers(web, tmp_path):
    """ExecStartPost waits for /readyz (as the portal's host: ALLOWED_HOSTS), so a rolling
    upgrade's `systemctl restart` returns when the instance can serve; an instance that
    never gets ready fails its start, saying why."""
    (line,) = [x for x in unit_lines() if x.startswith("ExecStartPost=")]
    port = int(web.rsplit(":", 1)[1])
    env = {**unit_environment(), "PORTAL_WEB_BIND": "127.0.0.1"}
    command = line.removeprefix("ExecStartPost=").replace("%i", str(port))
    command = re.sub(r"\$\{([A-Z_]+)\}", lambda m: env[m[1]], command)
    argv = shlex.split(command)
    argv = [sys.executable, str(ROOT / "deploy" / "wait-ready.py"), *argv[2:]]
    assert argv[2] == f"http://127.0.0.1:{port}/readyz"
    ready = subprocess.run(
        argv, env={**os.environ, "PORTAL_URL": "http://localhost"}, capture_output=True, timeout=60
    )
    assert ready.returncode == 0, ready.stderr
    closed = [*argv[:2], f"http://127.0.0.1:{free_port()}/readyz", "--timeout", "1"]
    never = subprocess.run(closed, capture_output=True, text=True, timeout=60)
    assert never.returncode == 1 and "not ready after 1 s" in never.stderr
