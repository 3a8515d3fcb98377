"""Start-up behaviour of portal.settings, checked in fresh interpreters."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PORTAL_DEMO", "DEBUG", "SECRET_KEY", "DATABASE_URL"}
    }
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "portal.settings", **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_production_requires_a_secret_key():
    result = run_python("import django; django.setup()", {})
    assert result.returncode != 0
    assert "SECRET_KEY (or SECRET_KEY_FILE) is required" in result.stderr


def test_production_requires_an_encryption_key():
    result = run_python("import django; django.setup()", {"SECRET_KEY": "x" * 50})
    assert "PORTAL_ENCRYPTION_KEYS (or PORTAL_ENCRYPTION_KEY_FILE) is required" in result.stderr


def test_production_settings_start_with_keys_and_secure_cookies():
    from jobs.crypto import generate_key

    code = """
        import django; django.setup()
        from django.conf import settings
        print(settings.SESSION_COOKIE_SECURE, settings.DEBUG, settings.DATABASES['default']['ENGINE'])
    """
    env = {
        "SECRET_KEY": "x" * 50,
        "PORTAL_ENCRYPTION_KEYS": generate_key(),
        "DATABASE_URL": "postgres://u:p@db.example.org:5432/portal",
    }
    result = run_python(code, env)
    assert result.stdout.split() == ["True", "False", "django.db.backends.postgresql"], (
        result.stderr
    )


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
        from jobs.models import Tag
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
        "import django; django.setup()\nfrom jobs.models import Tag; print(Tag.objects.count())",
        sqlite_dir,
    ).stdout.strip()
    assert count == "600"
