"""Start-up behaviour of portal.settings, checked in fresh interpreters."""

import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tests import polling
from tests.settings_process import ROOT, run_python


def test_production_requires_a_secret_key():
    result = run_python("import django; django.setup()", {})
    assert result.returncode != 0
    assert "SECRET_KEY (or SECRET_KEY_FILE) is required" in result.stderr


def test_production_requires_an_encryption_key():
    result = run_python("import django; django.setup()", {"SECRET_KEY": "x" * 50})
    assert "PORTAL_ENCRYPTION_KEYS (or PORTAL_ENCRYPTION_KEY_FILE) is required" in result.stderr


def test_production_settings_start_with_keys_and_secure_cookies():
    from common.crypto import generate_key

    code = """
        import django; django.setup()
        from django.conf import settings
        print(settings.SESSION_COOKIE_SECURE, settings.DEBUG, settings.DATABASES['default']['ENGINE'])
        print(settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME)
    """
    env = {
        "SECRET_KEY": "x" * 50,
        "PORTAL_ENCRYPTION_KEYS": generate_key(),
        "DATABASE_URL": "postgres://u:p@db.example.org:5432/portal",
        "PORTAL_UPSTREAM_NETWORKS": "10.0.0.0/8",
    }
    result = run_python(code, env)
    assert result.stdout.split() == [
        "True",
        "False",
        "django.db.backends.postgresql",
        # No notebook on a session host (another subdomain) can set these.
        "__Host-sessionid",
        "__Host-csrftoken",
    ], result.stderr


def test_a_bad_value_stops_start_up_with_its_name():
    result = run_python(
        "import django; django.setup()", {"PORTAL_DEMO": "1", "PORTAL_SSH_CONNECT_TIMEOUT": "soon"}
    )
    assert "PORTAL_SSH_CONNECT_TIMEOUT='soon' is not a number" in result.stderr


@pytest.fixture
def sqlite_dir(tmp_path):
    env = {"PORTAL_DEMO": "1", "PORTAL_DATA_DIR": str(tmp_path)}
    migrate = subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        cwd=ROOT,
        env={**os.environ, **env, "DATABASE_URL": f"sqlite:///{tmp_path}/portal.sqlite3"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert migrate.returncode == 0, migrate.stderr
    return env


def test_embedded_default_is_sqlite_in_wal_mode(sqlite_dir):
    code = """
        import django; django.setup()
        from django.db import connection
        with connection.cursor() as c:
            c.execute('PRAGMA journal_mode'); print(c.fetchone()[0])
        print(connection.settings_dict['NAME'])
    """
    result = run_python(code, sqlite_dir)
    mode, name = result.stdout.split()
    assert mode == "wal", result.stderr
    assert name == str(Path(sqlite_dir["PORTAL_DATA_DIR"]) / "portal.sqlite3")


def test_concurrent_writers_on_sqlite_wait_instead_of_failing(sqlite_dir):
    """A web process and workers write at once: the busy timeout serialises them."""
    writer = """
        import sys, django; django.setup()
        from django.db import transaction
        from catalog.models import Tag
        for i in range(150):
            with transaction.atomic():  # read, then write: the lock-upgrade case
                Tag.objects.filter(name__startswith="w").count()
                Tag.objects.create(name=f"w{sys.argv[1]}-{i}")
                Tag.objects.filter(name=f"w{sys.argv[1]}-{i}").update(name=f"w{sys.argv[1]}-{i}-x")
        print("ok")
    """
    base = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(writer), str(n)],
            cwd=ROOT,
            env={**base, **sqlite_dir},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    for (out, err), proc in zip(results, procs, strict=True):
        assert proc.returncode == 0 and out.strip() == "ok", err[-2000:]
    count = run_python(
        "import django; django.setup()\nfrom catalog.models import Tag; print(Tag.objects.count())",
        sqlite_dir,
    ).stdout.strip()
    assert count == "600"


def test_demo_mode_makes_a_private_random_secret_key_once_per_install(tmp_path):
    """Before: a constant in the code, so every demo install (and the encryption key
    derived from it) had the same secret."""
    data = tmp_path / "var"
    code = """
        import django; django.setup()
        from django.conf import settings
        print(settings.SECRET_KEY)
    """
    env = {"PORTAL_DEMO": "1", "PORTAL_DATA_DIR": str(data)}
    first, second = run_python(code, env), run_python(code, env)
    assert first.returncode == 0, first.stderr
    key = first.stdout.strip()
    assert len(key) >= 50 and key == second.stdout.strip()
    assert "insecure" not in key
    assert (data / "secret_key").stat().st_mode & 0o777 == 0o600
    assert data.stat().st_mode & 0o777 == 0o700  # var/: the portal's user only
    other = run_python(code, {"PORTAL_DEMO": "1", "PORTAL_DATA_DIR": str(tmp_path / "other")})
    assert other.stdout.strip() != key  # another install, another key


def test_demo_mode_makes_an_existing_data_dir_private(tmp_path):
    """An install from before (var/ made 755, SQLite file 644 inside) is closed on start-up."""
    data = tmp_path / "var"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    (data / "portal.sqlite3").write_bytes(b"")
    result = run_python(
        "import django; django.setup()", {"PORTAL_DEMO": "1", "PORTAL_DATA_DIR": str(data)}
    )
    assert result.returncode == 0, result.stderr
    assert data.stat().st_mode & 0o777 == 0o700


def test_processes_starting_together_agree_on_the_secret_key(tmp_path):
    """Six processes read the settings (where the key is made, portal.env.local_secret) at
    one moment: each imports what the settings import, then blocks on a lock this test
    holds until all six are there, and all wake together when it lets go. Making a key
    takes each half a second, so all find none before any has written one. The race no
    longer depends on how fast the machine starts them (six full django.setup()s on two
    busy cores once took more than a fixed minute, and rarely overlapped at all)."""
    import fcntl
    from concurrent.futures import ThreadPoolExecutor

    processes = 6
    gate = tmp_path / "gate"
    gate.mkdir()
    code = """
        import fcntl, os, secrets, time
        from pathlib import Path
        import dj_database_url, django.conf, django.core.exceptions, kombu
        import portal.env, portal.redis_ha
        token_urlsafe = secrets.token_urlsafe
        def slow_token(*args):  # a slow disk, a busy machine: between the look and the link
            time.sleep(0.5)
            return token_urlsafe(*args)
        secrets.token_urlsafe = slow_token
        gate = Path(os.environ["TEST_GATE"])
        with open(gate / "lock") as lock:
            (gate / f"ready-{os.getpid()}").touch()
            fcntl.flock(lock, fcntl.LOCK_SH)  # until the test lets go
        from django.conf import settings
        print(settings.SECRET_KEY)
    """
    env = {"PORTAL_DEMO": "1", "PORTAL_DATA_DIR": str(tmp_path / "var"), "TEST_GATE": str(gate)}
    timeout = polling.scaled(60)
    with open(gate / "lock", "w") as lock, ThreadPoolExecutor(processes) as pool:
        fcntl.flock(lock, fcntl.LOCK_EX)
        runs = [pool.submit(run_python, code, env, timeout) for _ in range(processes)]

        def all_ready() -> bool:
            ended = [run.result() for run in runs if run.done()]
            assert not ended, f"ended before the gate opened: {[r.stderr for r in ended]}"
            return len(list(gate.glob("ready-*"))) == processes

        try:
            polling.until(all_ready, 60, f"{processes} processes at the gate", interval=0.05)
            time.sleep(0.2)  # the last one from its mark to the lock
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)  # whatever happened: none waits for its timeout
        results = [run.result() for run in runs]
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    keys = {r.stdout.strip() for r in results}
    assert len(keys) == 1 and "" not in keys


def test_the_cache_never_unpickles_what_it_reads():
    """A job that could write to Redis must not be able to run code in the portal: a
    pickle stored under a cache key reads as a miss (the real cache on the real Redis)."""
    import pickle

    import redis
    from django.conf import settings
    from django.core.cache import cache

    class Boom:
        def __reduce__(self):
            return (os.system, ("touch /tmp/portal-pickle-ran",))

    key = cache.make_and_validate_key("pickle-probe")
    redis.Redis.from_url(settings.REDIS_URL).set(key, pickle.dumps(Boom()), ex=60)
    assert cache.get("pickle-probe") is None
    assert not Path("/tmp/portal-pickle-ran").exists()
    # Nor can a foreign value make reading fail (JSON nested too deep for the parser).
    key = cache.make_and_validate_key("deep-probe")
    redis.Redis.from_url(settings.REDIS_URL).set(key, b"[" * 100_000, ex=60)
    assert cache.get("deep-probe") is None
    cache.set("json-probe", {"a": [1, 2.5]}, 60)
    assert cache.get("json-probe") == {"a": [1, 2.5]}
    counter = f"json-probe-n-{uuid.uuid4().hex}"  # not one a run a minute ago left behind
    assert cache.add(counter, 1, 60)
    assert cache.incr(counter) == 2  # counters stay raw integers


def test_the_portals_redis_refuses_commands_without_its_password():
    """`make demo`/`make test` run their own Redis with a random password (var/)."""
    import redis
    from django.conf import settings

    url = redis.connection.parse_url(settings.REDIS_URL)
    if not url.get("password"):
        pytest.skip("REDIS_URL has no password here (set outside make)")
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host=url["host"], port=url["port"]).ping()
    assert redis.Redis.from_url(settings.REDIS_URL).ping()


def test_test_runs_started_together_get_their_own_test_database(tmp_path):
    code = "from django.conf import settings; print(settings.DATABASES['default']['TEST']['NAME'])"
    names = set()
    for suffix in ("101", "202"):
        env = {
            "PORTAL_DEMO": "1",
            "PORTAL_DATA_DIR": str(tmp_path),
            "PORTAL_TEST_DB_SUFFIX": suffix,
        }
        for url in ("postgres://u@127.0.0.1:5432/portal", ""):
            result = run_python(code, {**env, "DATABASE_URL": url} if url else env)
            assert result.returncode == 0, result.stderr
            names.add(result.stdout.strip())
    assert names == {
        "test_portal_101",
        "test_portal_202",
        f"{tmp_path}/test.sqlite3_101",
        f"{tmp_path}/test.sqlite3_202",
    }


def test_a_renamed_proxy_setting_stops_the_start_instead_of_being_ignored():
    result = run_python(
        "import django; django.setup()",
        {"PORTAL_DEMO": "1", "SESSION_DOMAIN": "sessions.example.org"},
    )
    assert result.returncode != 0
    assert "SESSION_DOMAIN is now called PROXY_SESSION_DOMAIN" in result.stderr


@pytest.mark.parametrize("value", ["aes128-gcm@openssh.com -oProxyCommand=x", "aes,,ctr", ","])
def test_a_cipher_list_that_is_no_list_stops_the_start(value):
    result = run_python(
        "import django; django.setup()", {"PORTAL_DEMO": "1", "PORTAL_BULK_SSH_CIPHERS": value}
    )
    assert result.returncode != 0
    assert "PORTAL_BULK_SSH_CIPHERS is a comma-separated list" in result.stderr


def test_sessions_reach_only_the_networks_a_centre_names_outside_demo_and_debug():
    """PORTAL_UPSTREAM_NETWORKS: required in production (before: all of RFC 1918 by
    default, so a session link reached every private host); in demo and debug the private
    ranges and loopback (the dev clusters' nodes are 127.0.0.1)."""
    from common.crypto import generate_key

    code = """
        import django; django.setup()
        from django.conf import settings
        print(",".join(settings.PORTAL_UPSTREAM_NETWORKS))
    """
    production = {"SECRET_KEY": "x" * 50, "PORTAL_ENCRYPTION_KEYS": generate_key()}
    result = run_python(code, production)
    assert result.returncode != 0
    assert "PORTAL_UPSTREAM_NETWORKS is required unless DEBUG=1 or PORTAL_DEMO=1" in result.stderr
    result = run_python(code, {**production, "PORTAL_UPSTREAM_NETWORKS": "10.20.0.0/16"})
    assert result.stdout.split() == ["10.20.0.0/16"], result.stderr
    result = run_python(code, {"PORTAL_DEMO": "1"})
    assert "127.0.0.0/8" in result.stdout.split(",") and "::1/128" in result.stdout, result.stderr
    assert "10.0.0.0/8" in result.stdout.split(","), result.stderr
    result = run_python(code, {**production, "PORTAL_UPSTREAM_NETWORKS": "10.0.0.1/8"})
    assert result.returncode != 0 and "PORTAL_UPSTREAM_NETWORKS" in result.stderr


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PORTAL_OIDC_ISSUER": "https://idp.example.org"}, "PORTAL_OIDC_CLIENT_ID is required"),
        (
            {
                "PORTAL_OIDC_ISSUER": "https://idp.example.org",
                "PORTAL_OIDC_CLIENT_ID": "p",
                "PORTAL_OIDC_SCOPES": "profile",
            },
            "PORTAL_OIDC_SCOPES must contain openid",
        ),
        ({"PORTAL_OIDC_LEEWAY": "3600"}, "PORTAL_OIDC_LEEWAY=3600 must be at most 300"),
        (
            {
                "PORTAL_OIDC_ISSUER": "https://idp.example.org",
                "PORTAL_OIDC_CLIENT_ID": "portal",
                "PORTAL_OIDC_API_AUDIENCE": "portal",
            },
            "PORTAL_OIDC_API_AUDIENCE must not be the client id",
        ),
        ({"PORTAL_OIDC_CONFIRM_MAX_AGE": "2"}, "PORTAL_OIDC_CONFIRM_MAX_AGE=2 must be at least 5"),
        (
            {"PORTAL_OIDC_CONFIRM_MAX_AGE": str(31 * 24 * 3600)},
            "PORTAL_OIDC_CONFIRM_MAX_AGE=2678400 must be at most 2592000",
        ),
    ],
)
def test_oidc_settings_that_cannot_work_stop_the_start(env, message):
    result = run_python("import django; django.setup()", {"PORTAL_DEMO": "1", **env})
    assert result.returncode != 0 and message in result.stderr


def test_oidc_is_off_without_an_issuer_and_the_client_secret_may_come_from_a_file(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    code = """
        import django; django.setup()
        from django.conf import settings
        print(settings.PORTAL_OIDC_CLIENT_SECRET, settings.PORTAL_OIDC_API_AUDIENCE)
    """
    env = {
        "PORTAL_DEMO": "1",
        "PORTAL_OIDC_ISSUER": "https://idp.example.org/",
        "PORTAL_OIDC_CLIENT_ID": "portal",
        "PORTAL_OIDC_CLIENT_SECRET_FILE": str(secret),
    }
    # No API audience unless one is set: never the client id by default.
    assert run_python(code, env).stdout.split() == ["s3cret"]


def test_a_provider_confirmation_and_a_session_last_a_working_day_by_default():
    code = """
        import django; django.setup()
        from django.conf import settings
        print(settings.PORTAL_OIDC_CONFIRM_MAX_AGE, settings.SESSION_COOKIE_AGE)
    """
    assert run_python(code, {"PORTAL_DEMO": "1"}).stdout.split() == ["36000", "36000"]
    env = {"PORTAL_DEMO": "1", "PORTAL_OIDC_CONFIRM_MAX_AGE": "7200"}
    assert run_python(code, env).stdout.split() == ["7200", "7200"]
    env["PORTAL_SESSION_AGE"] = "600"
    assert run_python(code, env).stdout.split() == ["7200", "600"]
