"""What a job's model says happened to it, live, for the parts of the portal that follow
jobs. Models send these after their transaction commits; they import no receiver.
Receivers are connected in their app's ``AppConfig.ready()``: jobs.broadcast publishes
every change to pages (JobsConfig), the proxy pushes a session's route (ProxyConfig).

A lost signal costs a page a refresh. What a job's change must not lose (its notifications,
a session ready and GPUs idle among them; its tails, accounting, its experiment's step) is
not sent here but written with the change (or its timeline line, Job.note) into its
JobEvent and delivered by jobs.outbox."""

from __future__ import annotations

from django.db import transaction
from django.dispatch import Signal

# A job's row changed (its state, details or timeline; jobs' models send it on commit), or
# its session link did (proxy/models.py, at once): ``job=``.
job_updated = Signal()

# An experiment ended (completed or cancelled; experiments/models.py, on commit, once):
# ``experiment=``. Its notification is owed until told (Experiment.told_at): the receiver
# queues it at once, a sweep again if that message was lost.
experiment_finished = Signal()

# A JobEvent was written (jobs' models, at once, in the change's transaction): ``event=``.
# jobs.outbox hands what it owes to the queue once that transaction commits (a sweep does
# it later if that fails, or if nothing heard this).
event_recorded = Signal()


def updated_on_commit(job) -> None:
    """Send ``job_updated`` for ``job`` once the current transaction commits."""
    transaction.on_commit(lambda: job_updated.send(sender=type(job), job=job))
