"""The jobs app's models, one module per domain. Clusters, accounts and GPU types live
in clusters/, images and session apps in catalog/, tokens and the audit log in identity/,
metrics in metrics/ (those keep the app label ``jobs`` or their own, and their tables).

- job: Job, its relations and predicates, composed of parts (abstract models):
  - request: JobRequest (what was asked, and its checks)
  - run: JobRun (where it stands on the scheduler, and the state machine)
  - annotations: JobAnnotations (its note, parameters and tags)
- events: JobEvent (the timeline and the outbox of what a change owes)
- arrays: JobArray (jobs submitted as one scheduler array)
- attempts: JobAttempt (each run of a requeued job, from accounting)
- annotations: also JobTag (a run's tags) and the bounds of tags, notes and parameters
"""

from jobs.models.annotations import JobTag
from jobs.models.arrays import JobArray
from jobs.models.attempts import JobAttempt
from jobs.models.events import JobEvent
from jobs.models.job import Job

__all__ = ["Job", "JobArray", "JobAttempt", "JobEvent", "JobTag"]
