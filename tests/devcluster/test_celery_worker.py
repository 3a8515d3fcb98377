"""The whole chain with a real Celery worker on Redis: queue after commit, submit, sync, cancel."""

import time

import pytest
from django.db import transaction

from jobs import tasks
from jobs.models import Job
from tests import factories
from tests.livestack import LiveStack

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(devcluster, tmp_path):
    """Only a Celery worker (no web server): the test plays the web process and beat."""
    stack = LiveStack(tmp_path)
    stack.start_worker()
    yield stack.queue
    stack.stop()


def wait_for(job: Job, states: set[str], queue: str, timeout: float = 60) -> Job:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.state in states:
            return job
        tasks.sync_clusters.apply_async(queue=queue)  # what beat does every interval
        time.sleep(1)
    raise AssertionError(f"job {job.pk} is {job.state} ({job.message}), wanted {states}")


def test_worker_submits_after_commit_and_sync_follows_the_job_to_completed(
    worker, devcluster, owner
):
    image = factories.image("host-w")
    with transaction.atomic():
        job = factories.job(owner, devcluster, "echo via worker; exit 0", image=image)
        transaction.on_commit(lambda: tasks.submit_job.apply_async((job.pk,), queue=worker))
    job = wait_for(job, {"completed", "failed", "submit_failed"}, worker)
    assert job.state == "completed", job.message
    assert [e.to_state for e in job.events.all()][0] == "pending"


def test_worker_cancels_a_running_job(worker, devcluster, owner):
    job = factories.job(owner, devcluster, "sleep 300", image=factories.image("host-c"))
    tasks.submit_job.apply_async((job.pk,), queue=worker)
    wait_for(job, {"running"}, worker)
    assert job.request_cancel()
    tasks.cancel_job.apply_async((job.pk,), queue=worker)
    assert wait_for(job, {"cancelled"}, worker, timeout=30).state == "cancelled"
