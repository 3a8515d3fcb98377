"""A job's log tail, read over SSH for its page (every read audited)."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse

from clusters import files, ssh
from common.throttle import throttled
from frontend.views.common import get_job_for_user
from identity import audit


@login_required
@throttled("cluster-pages", json=True)
def job_logs(request, pk: int, stream: str):
    job = get_job_for_user(request, pk)
    if stream not in files.LOG_STREAMS:
        raise Http404("no such log")
    try:
        tail = audit.read_job_log(request.user, job, stream)
    except ssh.ClusterError as exc:
        return JsonResponse(
            {"error": f"Could not read the log from {job.cluster.name}: {exc}"}, status=502
        )
    return JsonResponse({"text": tail.text, "size": tail.size, "truncated": tail.truncated})
