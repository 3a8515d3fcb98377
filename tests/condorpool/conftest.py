"""The real HTCondor pool of `make condorpool`, reached over SSH like any access point."""

import os
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from jobs import devcluster as devcluster_mod
from jobs.slurm import pool


def _required() -> bool:
    return os.environ.get("PORTAL_REQUIRE_CONDORPOOL") == "1"


@pytest.fixture(scope="session")
def condorpool_info() -> dict:
    """pool.json written by `make condorpool`; skips (or fails, when required) without it."""
    try:
        return devcluster_mod.read_info(Path(settings.CONDORPOOL_DIR), "pool.json", "condorpool")
    except devcluster_mod.DevclusterMissing as exc:
        if _required():
            pytest.fail(f"PORTAL_REQUIRE_CONDORPOOL=1 but {exc}")
        pytest.skip(str(exc))


def as_pool_root(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """An HTCondor command as root inside the pool's root (what an admin would run)."""
    root = Path(settings.CONDORPOOL_DIR) / "root"
    return subprocess.run(
        ["chroot", str(root), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=check,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"},
    )


@pytest.fixture
def condorpool(db, condorpool_info, owner):
    """The pool registered in the test database, ``owner`` mapped to its first user; the
    user's jobs are removed afterwards, even when the test failed."""
    cluster = devcluster_mod.register(condorpool_info, {"owner": condorpool_info["default_user"]})
    yield cluster
    as_pool_root("condor_rm", condorpool_info["default_user"], check=False)


@pytest.fixture(autouse=True)
def _fresh_pool():
    pool.close_all()
    yield
    pool.close_all()


@pytest.fixture(autouse=True)
def queued_metric_reads(monkeypatch):
    """No Celery worker runs here: record the metrics reads a sync queues."""
    from jobs import tasks

    calls = []
    monkeypatch.setattr(tasks.tail_metrics, "delay", lambda *a, **k: calls.append((a, k)))
    monkeypatch.setattr(tasks.read_error_tail, "delay", lambda *a, **k: calls.append((a, k)))
    monkeypatch.setattr(tasks.record_attempts, "delay", lambda *a, **k: calls.append((a, k)))
    return calls
