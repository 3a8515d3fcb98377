"""An endpoint follows its job: running with its session registered, it is routed; its
job ended, it is stopped (or failed, with the job's words) and its route taken away."""

from __future__ import annotations

from django.utils import timezone

from endpoints import routes
from endpoints.models import Endpoint
from jobs.models import Job


def on_job_changed(sender, job: Job, **kwargs) -> None:
    endpoint = Endpoint.objects.filter(job_id=job.pk).first()
    if endpoint is None:
        return
    fields: dict = {}
    if job.is_final and endpoint.state in (Endpoint.State.STARTING, Endpoint.State.RUNNING):
        # A time limit reached is a stop like an idle one: the next request starts it again.
        failed = job.state in (Job.State.FAILED, Job.State.SUBMIT_FAILED)
        fields = {
            "state": Endpoint.State.FAILED if failed else Endpoint.State.STOPPED,
            "message": f"Its job {job.pk} ended {job.state}: {job.message}"[:2000],
        }
    if routes.push(endpoint.pk) and endpoint.state == Endpoint.State.STARTING:
        fields = {
            "state": Endpoint.State.RUNNING,
            "message": "",
            "running_since": timezone.now(),
            **{name: 0 for name in ("requests", "errors", "response_ms", "total_ms")},
        }
    if fields:
        Endpoint.objects.filter(pk=endpoint.pk).update(updated_at=timezone.now(), **fields)
