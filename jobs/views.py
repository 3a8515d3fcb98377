"""The job-facing metrics upload endpoint (per-job token, not a user credential)."""

from __future__ import annotations

import json

from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from jobs.metrics import ingest
from jobs.models import Job


def _error(status: int, message: str, **extra) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


@csrf_exempt
@require_POST
def metrics_upload(request, pk: int):
    """POST a JSON array of metric records with ``Authorization: Bearer <job token>``."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return _error(401, "Send the job's metrics token as 'Authorization: Bearer <token>'.")
    job = Job.objects.filter(pk=pk).first()
    # An unknown job and a wrong token get the same answer: ids are not probed this way.
    if job is None or not ingest.token_matches(job, token.strip()):
        return _error(403, f"This token is not valid for job {pk}.")
    if job.is_final:
        return _error(410, f"Job {pk} has ended; its metrics files are read by the portal.")
    try:
        items = json.loads(request.body)
    except RequestDataTooBig:
        return _error(413, "The batch is too large; send fewer records per request.")
    except (ValueError, UnicodeDecodeError):
        return _error(400, "The body must be a JSON array of metric records.")
    parsed = ingest.parse_batch(items)
    if parsed.errors and not parsed.records:
        return _error(400, "No valid records.", rejected=parsed.errors[:20])
    result = ingest.ingest(job, parsed.records)
    return JsonResponse(
        {
            "inserted": result.inserted,
            "duplicates": result.duplicates,
            "rejected": parsed.errors[:20],
        }
    )
