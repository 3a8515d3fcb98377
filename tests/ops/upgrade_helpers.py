"""``manage.py`` of any checkout on any database, in a subprocess (the backup and upgrade
tests): the code of ``root`` (this checkout, or a release's worktree) with this
checkout's virtualenv, data directory and secret key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def manage(
    database_url: str, *argv: str, root: Path = ROOT, check: bool = True, stdin: str = ""
) -> subprocess.CompletedProcess:
    from django.conf import settings

    env = {
        **os.environ,
        "PORTAL_DEMO": "1",
        "DATABASE_URL": database_url,
        "ALLOWED_HOSTS": "testserver,localhost",
        "PORTAL_LOG_FORMAT": "console",
        "PORTAL_DATA_DIR": str(settings.DATA_DIR),
        "SECRET_KEY": settings.SECRET_KEY,
        "PYTHONPATH": str(root),
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    done = subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=root,
        env=env,
        input=stdin or None,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check:
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def run_code(database_url: str, code: str, root: Path = ROOT) -> str:
    """``code`` run by ``manage.py shell`` of ``root``: its standard output."""
    return manage(database_url, "shell", stdin=code, root=root).stdout


POPULATION = (Path(__file__).parent / "population.py").read_text()


def populate(database_url: str, root: Path = ROOT) -> None:
    run_code(database_url, POPULATION + "\npopulate()\n", root)


def snapshot(database_url: str, root: Path = ROOT) -> dict:
    out = run_code(database_url, POPULATION + "\nsnapshot()\n", root)
    return json.loads(out.strip().splitlines()[-1])
