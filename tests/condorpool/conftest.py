"""The real HTCondor pool of `make condorpool`, reached over SSH like any access point
(fixtures condorpool_info, condorpool and as_pool_root: tests/conftest.py)."""

import pytest

from jobs.cluster import pool


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
