"""Redis Sentinel (portal/redis_ha.py): REDIS_SENTINELS and REDIS_SENTINEL_MASTER switch the
broker, the cache and the channel layer to the master the sentinels name, checked in
fresh interpreters as portal.settings reads them."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal import redis_ha

ROOT = Path(__file__).resolve().parents[2]

SETTINGS = """
    import django, json; django.setup()
    from django.conf import settings as s
    from django.core.cache import cache
    print(json.dumps({
        "broker": s.CELERY_BROKER_URL,
        "transport": s.CELERY_BROKER_TRANSPORT,
        "transport_options": s.CELERY_BROKER_TRANSPORT_OPTIONS,
        "channels": s.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"],
        "cache": s.CACHES["default"],
        "pool": cache._cache._pool_class.__name__,
    }))
"""


def run_python(code: str, env: dict) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with the test run's environment, Redis settings
    replaced by ``env``."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "PORTAL_DEMO"))}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env={**keep, "DJANGO_SETTINGS_MODULE": "portal.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def settings_with(env: dict) -> dict:
    result = run_python(SETTINGS, {"PORTAL_DEMO": "1", **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_sentinels_switch_the_broker_the_cache_and_the_channel_layer():
    found = settings_with(
        {
            "REDIS_URL": "redis://:p%40ss@ignored.example.org:6379/3",
            "REDIS_SENTINELS": "10.0.0.5:26379, 10.0.0.6:26379,[fd00::7]:26380",
            "REDIS_SENTINEL_MASTER": "portal",
            "REDIS_SENTINEL_PASSWORD": "s3cret",
        }
    )
    sentinels = [["10.0.0.5", 26379], ["10.0.0.6", 26379], ["fd00::7", 26380]]
    assert found["broker"] == (
        "sentinel://:p%40ss@10.0.0.5:26379/3;sentinel://:p%40ss@10.0.0.6:26379/3;"
        "sentinel://:p%40ss@[fd00::7]:26380/3"
    )
    assert found["transport"] == "portal.worker:SentinelTransport"
    options = found["transport_options"]
    assert options["master_name"] == "portal" and options["visibility_timeout"] > 0
    assert options["sentinel_kwargs"]["password"] == "s3cret"
    (host,) = found["channels"]
    assert host["master_name"] == "portal" and host["sentinels"] == sentinels
    assert (host["password"], host["db"]) == ("p@ss", 3)
    assert found["cache"]["OPTIONS"]["pool_class"] == "portal.redis_ha.SentinelPool"
    assert found["cache"]["OPTIONS"]["sentinels"] == sentinels
    assert found["cache"]["OPTIONS"]["serializer"] == "common.cache.JSONSerializer"
    assert found["pool"] == "SentinelPool"


def test_without_sentinels_everything_uses_redis_url():
    found = settings_with({"REDIS_URL": "redis://:pw@10.0.0.9:6379/2"})
    assert found["broker"] == "redis://:pw@10.0.0.9:6379/2"
    assert found["transport"] == "portal.worker:Transport"
    assert "master_name" not in found["transport_options"]
    assert [host["address"] for host in found["channels"]] == ["redis://:pw@10.0.0.9:6379/2"]
    assert "pool_class" not in found["cache"]["OPTIONS"]


@pytest.mark.parametrize(
    "env, message",
    [
        ({"REDIS_SENTINELS": "10.0.0.5:26379"}, "go together"),
        ({"REDIS_SENTINEL_MASTER": "portal"}, "go together"),
        (
            {"REDIS_SENTINELS": "10.0.0.5", "REDIS_SENTINEL_MASTER": "portal"},
            "REDIS_SENTINELS: '10.0.0.5' is not host:port",
        ),
        (
            {"REDIS_SENTINELS": "10.0.0.5:26379", "REDIS_SENTINEL_MASTER": "a b"},
            "REDIS_SENTINEL_MASTER='a b'",
        ),
    ],
)
def test_a_half_or_wrong_sentinel_setting_stops_the_start(env, message):
    result = run_python("import django; django.setup()", {"PORTAL_DEMO": "1", **env})
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_the_database_number_must_be_a_number():
    with pytest.raises(ImproperlyConfigured):
        redis_ha.broker_url("redis://:pw@x/zero", [("h", 1)])


def production(env: dict) -> dict:
    """``env`` with what a production start needs before the Redis settings are read."""
    from common.crypto import generate_key

    return {
        "SECRET_KEY": "x" * 50,
        "PORTAL_ENCRYPTION_KEYS": generate_key(),
        "PORTAL_UPSTREAM_NETWORKS": "10.0.0.0/8",
        **env,
    }


SENTINELS = {"REDIS_SENTINELS": "10.0.0.5:26379", "REDIS_SENTINEL_MASTER": "portal"}


@pytest.mark.parametrize(
    "env, message",
    [
        (
            {"PORTAL_DEMO": "1", "REDIS_URL": "rediss://:pw@x:6379/0", **SENTINELS},
            "REDIS_URL is rediss:// (TLS), but Sentinel mode",
        ),
        (
            production({"REDIS_URL": "rediss://:pw@x:6379/0", **SENTINELS}),
            "REDIS_URL is rediss:// (TLS), but Sentinel mode",
        ),
        (
            production({"REDIS_URL": "redis://:pw@x:6379/0", **SENTINELS}),
            "REDIS_SENTINEL_PASSWORD (or REDIS_SENTINEL_PASSWORD_FILE) is required",
        ),
    ],
)
def test_sentinel_mode_refuses_tls_it_would_drop_and_sentinels_without_a_password(env, message):
    """Before: rediss:// was silently dropped to plain TCP, and any sentinel reached without
    a password could name the master (#39)."""
    result = run_python("import django; django.setup()", env)
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_with_a_sentinel_password_production_starts_and_the_demo_needs_none():
    password = {"REDIS_SENTINEL_PASSWORD": "s3cret", "REDIS_URL": "redis://:pw@x:6379/0"}
    code = "import django; django.setup(); print('started')"
    result = run_python(code, production({**SENTINELS, **password}))
    assert result.stdout.strip().endswith("started"), result.stderr
    result = run_python(code, {"PORTAL_DEMO": "1", "REDIS_URL": "redis://x:6379/0", **SENTINELS})
    assert result.stdout.strip().endswith("started"), result.stderr
