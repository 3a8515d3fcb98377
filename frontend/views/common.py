"""What the page views share: the job a request may see, and how it asked."""

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404

from jobs import access
from jobs.models import Job


def get_job_for_user(request, pk: int) -> Job:
    """The job if the user may see it (jobs/access.py: its owner, staff, its project's
    members); 404 otherwise, never 403 (that would say it exists)."""
    jobs = Job.objects.visible_to(request.user).select_related(
        "image", "partition", "cluster", "owner", "project"
    )
    return get_object_or_404(jobs, pk=pk)


def get_job_to_act(request, pk: int) -> Job:
    """The job if the user may act on it (its owner, staff); 404 if they may not see it,
    403 if they see it as a colleague."""
    job = get_job_for_user(request, pk)
    if not access.may_act(request.user, job.owner_id):
        raise PermissionDenied("Only its owner may change this job.")
    return job


def get_job_to_relaunch(request, pk: int) -> Job:
    """The job if the user may launch it again as themselves (its owner, staff, a member
    of its project): 404 if they may not see it, 403 if they see it as a viewer."""
    job = get_job_for_user(request, pk)
    if not access.may_relaunch(request.user, job.owner_id, job.project_id, job.private):
        raise PermissionDenied("A viewer of this job's project does not launch on it.")
    return job


def wants_json(request) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def int_or_404(value: str) -> int:
    """A number from the query string (a job's id); 404 when it is none."""
    try:
        number = int(value)
    except ValueError:
        raise Http404("no such job") from None
    if not 0 < number < 2**63:  # (a database id; beyond it the query itself would fail)
        raise Http404("no such job")
    return number
