"""What the page views share: the job a request may see, and how it asked."""

from django.http import Http404
from django.shortcuts import get_object_or_404

from jobs.models import Job


def get_job_for_user(request, pk: int) -> Job:
    """The job if the user may see it (owner or staff); 404 otherwise, never 403."""
    jobs = Job.objects.for_user(request.user).select_related(
        "image", "partition", "cluster", "owner"
    )
    return get_object_or_404(jobs, pk=pk)


def wants_json(request) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def int_or_404(value: str) -> int:
    """A number from the query string (a job's id); 404 when it is none."""
    try:
        return int(value)
    except ValueError:
        raise Http404("no such job") from None
