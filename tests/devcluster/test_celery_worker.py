"""The whole chain with a real Celery worker on Redis: queue after commit, submit, sync, cancel."""

import time

import pytest
from django.db import transaction

from jobs import tasks
from tests import factories, polling
from tests.devcluster.helpers import worker_until
from tests.livestack import LiveStack, Redis

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(devcluster, tmp_path):
    """Only a Celery worker (no web server): the test plays the web process and beat."""
    stack = LiveStack(tmp_path)
    stack.start_worker()
    yield stack.queue
    stack.stop()


def test_worker_submits_after_commit_and_sync_follows_the_job_to_completed(
    worker, devcluster, owner
):
    image = factories.image("host-w")
    with transaction.atomic():
        job = factories.job(owner, devcluster, "echo via worker; exit 0", image=image)
        transaction.on_commit(lambda: tasks.submit_job.apply_async((job.pk,), queue=worker))
    job = worker_until(job, {"completed", "failed", "submit_failed"}, worker)
    assert job.state == "completed", job.message
    assert [e.to_state for e in job.events.all()][0] == "pending"


def test_worker_cancels_a_running_job(worker, devcluster, owner):
    job = factories.job(owner, devcluster, "sleep 300", image=factories.image("host-c"))
    tasks.submit_job.apply_async((job.pk,), queue=worker)
    worker_until(job, {"running"}, worker)
    assert job.request_cancel()
    tasks.cancel_job.apply_async((job.pk,), queue=worker)
    assert worker_until(job, {"cancelled"}, worker, timeout=30).state == "cancelled"


def test_worker_survives_three_redis_restarts_under_load_and_still_runs_jobs(
    devcluster, owner, tmp_path
):
    """Redis killed and started empty three times while the worker takes, retries and
    queues tasks (Celery 5.7 alone ends the worker with "Unrecoverable error" here:
    portal/worker.py). The same worker process then still submits a job to Slurm."""
    broker = Redis(tmp_path)
    broker.start()
    stack = LiveStack(tmp_path, env={"REDIS_URL": broker.url})
    stack.start_worker()
    app = tasks.submit_job.app
    try:
        with app.connection_for_write(broker.url) as conn:
            for restart in range(3):
                deadline = time.monotonic() + 4
                while time.monotonic() < deadline:  # tasks in flight as Redis goes
                    for _ in range(5):
                        tasks.sync_cluster.apply_async(
                            (devcluster.pk,), queue=stack.queue, countdown=3, connection=conn
                        )
                        tasks.recover_jobs.apply_async(queue=stack.queue, connection=conn)
                    time.sleep(0.1)
                broker.kill()
                time.sleep(2)
                broker.start()
                time.sleep(1)
                assert not stack.exited(), f"restart {restart + 1}: {stack.logs()}"
        time.sleep(5)  # the consumer reconnects (backing off) after the last restart
        assert not stack.exited(), stack.logs()
        job = factories.job(owner, devcluster, "echo after outages", image=factories.image("h-r"))
        with app.connection_for_write(broker.url) as conn:
            tasks.submit_job.apply_async((job.pk,), queue=stack.queue, connection=conn)

        def taken() -> bool:
            job.refresh_from_db()
            return job.state != "pending"

        polling.until(
            taken, 60, lambda: f"the worker to take the job after the outages\n{stack.logs()}", 1
        )
        assert not stack.exited(), stack.logs()
    finally:
        stack.stop()
        broker.kill()


def test_a_webhook_is_posted_by_the_worker_from_its_own_queue(worker, owner, cluster):
    """The worker started as `make demo` starts it (no -Q) consumes the webhooks' queue:
    a delivery sent there reaches a real receiver, signed."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from notifications import tasks as notification_tasks
    from notifications import webhook
    from notifications.events import Event, Message
    from notifications.models import Notification, Preference, Webhook

    got: list[tuple[dict, bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            got.append((dict(self.headers), body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        _, secret = Webhook.configure(owner, url)
        Preference.set(owner, Event.JOB_FAILED, webhook=True, email=False)
        job = factories.job(owner, cluster, state="failed")
        note = Notification.record(owner, Event.JOB_FAILED, Message("Failed."), "/", job=job)
        assert note is not None and note.webhook == "pending"
        notification_tasks.deliver_webhook.apply_async((note.pk,), queue=f"{worker}-webhooks")
        polling.until(lambda: got, 30, "the webhook to be posted", interval=0.2)
    finally:
        server.shutdown()
        server.server_close()
    [(headers, body)] = got
    assert webhook.verify(
        secret, headers["X-Portal-Timestamp"], headers["X-Portal-Signature"], body
    )

    def sent() -> bool:
        note.refresh_from_db()
        return note.webhook == "sent"

    polling.until(sent, 10, lambda: f"the notification to be sent ({note.webhook})", 0.2)
