"""Notifications by email on the real path: a job fails on the dev cluster, the Celery
worker's sync sees it, the signal queues the notification, the worker reads the stderr tail
and sends through `make mail`'s exim, and the message is in its Maildir within 30 s of the
portal learning the change."""

from datetime import UTC, datetime

import pytest

from jobs import tasks
from jobs.models import Job
from tests import factories
from tests.devcluster.helpers import worker_until
from tests.livestack import LiveStack
from tests.mailbox import address

pytestmark = [pytest.mark.devcluster, pytest.mark.mail, pytest.mark.django_db(transaction=True)]


def test_a_failed_jobs_email_with_its_stderr_tail_arrives_within_30_s(
    devcluster, owner, mailbox, tmp_path
):
    owner.email = address("owner")
    owner.save(update_fields=["email"])
    stack = LiveStack(
        tmp_path,
        env={
            "EMAIL_HOST": mailbox.host,
            "EMAIL_PORT": str(mailbox.port),
            "PORTAL_NOTIFY_BATCH_SECONDS": "1",
        },
    )
    stack.start_worker()
    try:
        job = factories.job(
            owner,
            devcluster,
            "echo 'Traceback (most recent call last):' >&2; "
            "echo 'RuntimeError: <b>CUDA</b> out of memory' >&2; exit 3",
            image=factories.image("host-mail"),
            name="train <big>",
        )
        tasks.submit_job.apply_async((job.pk,), queue=stack.queue)
        worker_until(job, set(Job.FINAL_STATES), stack.queue, timeout=90)
        assert job.state == Job.State.FAILED, (job.state, job.message, stack.logs())
        (message,) = mailbox.wait_for(owner.email, timeout=40)
        arrived = datetime.now(UTC)
    finally:
        stack.stop()
    took = (arrived - job.ended_at).total_seconds()
    assert took <= 30, f"{took:.1f} s after the portal saw the failure"
    assert message.get_content_type() == "text/plain"
    assert (
        str(message["Subject"])
        .strip()
        .startswith(f"Your job {job.pk} (train <big>) failed on devcluster")
    )
    body = message.get_content()
    assert f"{stack.url}/jobs/{job.pk}/" in body
    assert "    RuntimeError: <b>CUDA</b> out of memory" in body  # as text, never markup
    assert (
        str(message["List-Unsubscribe"])
        .strip()
        .startswith(f"<{stack.url}/notifications/unsubscribe/")
    )
    print(f"email in the Maildir {took:.1f} s after the portal saw the failure")
