"""The jobs app's models, one module per domain; metrics live in their own app (jobs.metrics).

- choices: the job vocabulary (states, kinds, work directories), written once
- clusters: Cluster, Partition
- accounts: ClusterAccount (how a person logs in to a cluster, and its proof)
- catalog: Tag, ContainerImage, ImageCheck
- apps: SessionApp (what a session runs: the shipped apps and those a centre adds)
- job: Job, its relations and predicates, composed of parts (abstract models):
  - request: JobRequest (what was asked, and its checks)
  - run: JobRun (where it stands on the scheduler, and the state machine)
  - annotations: JobAnnotations (its note, parameters and tags)
- events: JobEvent (the timeline and the outbox of what a change owes)
- arrays: JobArray (jobs submitted as one scheduler array)
- attempts: JobAttempt (each run of a requeued job, from accounting)
- gpus: GpuType (a cluster's GPU types: capability, memory) and choosing by them
- tokens: ApiToken
- personal_keys: PersonalKey (a person's SSH public keys, certified to reach their jobs)
- audit: AuditEvent (what the portal did on a cluster for whom)
- annotations: also JobTag (a run's tags) and the bounds of tags, notes and parameters
"""

from jobs.models.accounts import ClusterAccount
from jobs.models.annotations import JobTag
from jobs.models.apps import SessionApp
from jobs.models.arrays import JobArray
from jobs.models.attempts import JobAttempt
from jobs.models.audit import AuditEvent
from jobs.models.catalog import ContainerImage, ImageCheck, Tag
from jobs.models.clusters import Cluster, Partition
from jobs.models.events import JobEvent
from jobs.models.gpus import GpuType
from jobs.models.job import Job
from jobs.models.personal_keys import PersonalKey
from jobs.models.tokens import ApiToken

__all__ = [
    "ApiToken",
    "AuditEvent",
    "Cluster",
    "ClusterAccount",
    "ContainerImage",
    "GpuType",
    "ImageCheck",
    "Job",
    "PersonalKey",
    "JobArray",
    "JobAttempt",
    "JobEvent",
    "JobTag",
    "SessionApp",
    "Partition",
    "Tag",
]
