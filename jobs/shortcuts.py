"""The job a request may see, act on or launch again (Django's shortcuts, for jobs): the
one lookup every page and file view of a job goes through (projects/access.py decides)."""

from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404

from jobs.models import Job
from projects import access


def get_job_for_user(request, pk: int) -> Job:
    """The job if the user may see it (projects/access.py: its owner, staff, its project's
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
