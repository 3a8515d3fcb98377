import pytest

from jobs.cluster import pool


@pytest.fixture(autouse=True)
def _fresh_pool():
    pool.close_all()
    yield
    pool.close_all()


@pytest.fixture(autouse=True)
def queued_metric_reads(monkeypatch):
    """No Celery worker runs here: record the metrics reads a sync queues instead of
    leaving them in the broker for some later worker."""
    from jobs import tasks

    calls = []
    monkeypatch.setattr(tasks.tail_metrics, "delay", lambda *a, **k: calls.append((a, k)))
    return calls


@pytest.fixture(autouse=True)
def queued_error_tails(monkeypatch):
    """Likewise the stderr reads a sync queues for jobs that failed."""
    from jobs import tasks

    calls = []
    monkeypatch.setattr(tasks.read_error_tail, "delay", lambda *a, **k: calls.append(a))
    return calls
