"""The controller's Celery tasks: their queue and their lock."""

import pytest
from django.conf import settings
from django.core.cache import cache

from experiments import controller, tasks
from jobs.task_helpers import single_flight
from portal.celery import app


def test_steps_have_their_own_queue_which_a_plain_worker_consumes_too():
    """Sweeps never wait behind, nor hold up, other users' submissions; `celery worker`
    without -Q (make demo, the test stacks) consumes every queue (the webhooks' and the
    imports' too)."""
    route = app.amqp.router.route
    for name in ("advance_experiment", "advance_experiments"):
        queue = route({}, f"jobs.experiments.tasks.{name}")["queue"].name
        assert queue == settings.PORTAL_EXPERIMENT_QUEUE
    assert route({}, "jobs.tasks.submit_job")["queue"].name == settings.CELERY_TASK_DEFAULT_QUEUE
    assert settings.PORTAL_EXPERIMENT_QUEUE != settings.CELERY_TASK_DEFAULT_QUEUE
    assert set(app.amqp.queues) == {
        settings.CELERY_TASK_DEFAULT_QUEUE,
        settings.PORTAL_EXPERIMENT_QUEUE,
        settings.PORTAL_WEBHOOK_QUEUE,
        settings.PORTAL_IMPORT_QUEUE,
        settings.PORTAL_TRANSFER_QUEUE,
    }
    for name in ("start_transfer", "poll_transfer"):
        assert route({}, f"files.tasks.{name}")["queue"].name == settings.PORTAL_TRANSFER_QUEUE
    for name in ("import_upload", "resend_imports"):
        assert (
            route({}, f"jobs.tracking.tasks.{name}")["queue"].name == settings.PORTAL_IMPORT_QUEUE
        )


def test_the_step_lock_outlives_the_steps_time_limit(monkeypatch):
    """A slow step is killed (hard time limit) before its lock can expire: two steps of
    one experiment never run at once."""
    assert tasks.lock_seconds() > tasks.advance_experiment.time_limit
    held = []

    def step(experiment_id):
        held.append(not cache.add(f"experiment-lock:{experiment_id}", 1, timeout=5))

    monkeypatch.setattr(controller, "advance", step)
    tasks.advance_experiment.run(424242)
    assert held == [True]
    assert cache.add("experiment-lock:424242", 1, timeout=5)  # released after the step
    cache.delete("experiment-lock:424242")


@pytest.mark.parametrize("retaken", [False, True])
def test_a_holder_releases_only_its_own_lock(retaken):
    key = "test-single-flight"
    cache.delete(key)
    with single_flight(key, 30) as mine:
        assert mine
        if retaken:  # it expired under a slow holder and another worker took it
            cache.set(key, "another worker's", timeout=30)
    assert cache.get(key) == ("another worker's" if retaken else None)
    cache.delete(key)
