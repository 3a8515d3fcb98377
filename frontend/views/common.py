"""What the page views share: the job a request may see, and how it asked."""

from django.http import Http404

from jobs.shortcuts import get_job_for_user, get_job_to_act, get_job_to_relaunch

__all__ = ["get_job_for_user", "get_job_to_act", "get_job_to_relaunch", "int_or_404", "wants_json"]


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
