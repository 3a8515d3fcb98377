"""Metric endpoints, all in one place: the charts' JSON and CSV for the pages (session
login), the API's ``/api/v1/jobs/<id>/metrics/`` (mixed into the job viewset) and the
in-job client's upload (the job's own token). Storage and queries: ingest.py, query.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth.decorators import login_required
from django.http import JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, permissions, status
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotAuthenticated, ParseError, ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from common import prometheus as portal_metrics
from common.api_errors import RefuseNul
from common.jsonfast import JsonResponse as FastJsonResponse
from common.marks import streaming_view
from common.streams import for_server
from common.throttle import WindowThrottle
from jobs.api.parsers import JSONParser
from jobs.models import Job
from metrics import ingest, ranks
from metrics import query as metrics_query
from metrics.auth import JobTokenAuthentication
from metrics.serializers import IngestResultSerializer, MetricRecordSerializer


def _csv_download(request, job: Job, fmt: str) -> StreamingHttpResponse:
    """Every point, streamed: under ASGI a piece at a time (for_server), never first read
    whole into memory as Django's handler does with a plain iterator."""
    body, content_type, filename = metrics_query.export(job, fmt)
    http = getattr(request, "_request", request)  # DRF's request wraps Django's
    response = StreamingHttpResponse(for_server(http, body), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


# -- pages (the job page's charts) ------------------------------------------------------


@login_required
def job_metrics(request, pk: int):
    """Series of a job as JSON: all, or ``?series=1,2``; downsampled to ``width`` unless
    ``full=1``; ``lo``/``hi`` restrict the step range (zooming in)."""
    job = get_object_or_404(Job.objects.visible_to(request.user), pk=pk)
    try:
        query = metrics_query.SeriesQuery.parse(request.GET)
    except metrics_query.BadQuery as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    return FastJsonResponse({"job": job.pk, "series": metrics_query.job_series(job.pk, query)})


@login_required
def job_metrics_ranks(request, pk: int):
    """Each rank's node and progress (steps per second, steps behind) and the straggler."""
    job = get_object_or_404(Job.objects.visible_to(request.user), pk=pk)
    return FastJsonResponse({"job": job.pk, **ranks.job_progress(job.pk).as_dict()})


@streaming_view
@login_required
def job_metrics_export(request, pk: int):
    """Every point of every series, as CSV (default) or JSON lines, streamed."""
    job = get_object_or_404(Job.objects.visible_to(request.user), pk=pk)
    fmt = request.GET.get("format", "csv")
    if fmt not in ("csv", "json"):
        return JsonResponse({"error": "format must be csv or json"}, status=400)
    return _csv_download(request, job, fmt)


# -- REST API -------------------------------------------------------------------------


if TYPE_CHECKING:
    _ViewSet = GenericAPIView
else:
    _ViewSet = object


class MetricsActions(_ViewSet):
    """``GET /api/v1/jobs/<id>/metrics/``, mixed into the job API on the top floor (portal/api_urls.py)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("format", str, enum=["json", "csv"], description="csv: every point"),
            OpenApiParameter("series", str, description="Comma-separated series ids."),
            OpenApiParameter("lo", int),
            OpenApiParameter("hi", int),
            OpenApiParameter("width", int, description="Downsample to this many buckets."),
            OpenApiParameter("full", bool),
        ]
    )
    @action(detail=True, methods=["get"], url_path="metrics")
    def metrics(self, request, pk=None):
        """Metric series: downsampled to ``width``, or at full resolution for a step range."""
        job = self.get_object()
        if request.query_params.get("format") == "csv":
            return _csv_download(request, job, "csv")
        try:
            query = metrics_query.SeriesQuery.parse(request.query_params)
        except metrics_query.BadQuery as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        return Response({"job": job.pk, "series": metrics_query.job_series(job.pk, query)})

    @action(detail=True, methods=["get"], url_path="metrics/ranks")
    def metrics_ranks(self, request, pk=None):
        """Where each rank runs and how fast it goes: its node, last step, steps per second
        over its last points and steps behind the rank furthest ahead, read from the metric
        most ranks log (``key``); ``slowest`` names a rank that stands out as a straggler."""
        job = self.get_object()
        return Response({"job": job.pk, **ranks.job_progress(job.pk).as_dict()})


class MetricsJSONParser(JSONParser):
    """JSON, with a message that says what the body should be."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except ParseError:
            raise ParseError("The body must be a JSON array of metric records.") from None


class Gone(APIException):
    status_code = status.HTTP_410_GONE
    default_code = "gone"


class QuotaExceeded(APIException):
    status_code = 413
    default_code = "quota_exceeded"


class JobIngestThrottle(WindowThrottle):
    """Upload requests per job (PORTAL_METRICS_INGEST_RATE), whatever the caller's address."""

    scope = "ingest"

    def get_cache_key(self, request, view):
        job = request.auth
        return self.cache_format % {"scope": self.scope, "ident": f"job-{job.pk}-{job.uid}"}


class IsJobToken(permissions.BasePermission):
    message = "Send the job's metrics token as 'Authorization: Bearer <token>'."

    def has_permission(self, request, view):
        return isinstance(request.auth, Job)


class MetricIngestView(RefuseNul, generics.GenericAPIView):
    """Metric records from the in-job client, with the job's own token (not a user's).

    The body is a JSON array of ``{"seq", "time", "step", "metrics": {...}, "rank",
    "attempt", "system", "node"}`` records; records already stored (same series and seq)
    are counted as duplicates, so a retried batch adds nothing."""

    authentication_classes = [JobTokenAuthentication]
    permission_classes = [IsJobToken]
    throttle_classes = [JobIngestThrottle]
    parser_classes = [MetricsJSONParser]
    serializer_class = IngestResultSerializer  # the answer; requests are parsed by ingest

    def permission_denied(self, request, message=None, code=None):
        if request.auth is None:
            raise NotAuthenticated(IsJobToken.message)
        super().permission_denied(request, message, code)

    @extend_schema(request=MetricRecordSerializer(many=True), responses=IngestResultSerializer)
    def post(self, request, pk: int):
        job = request.auth
        if job.is_final:
            raise Gone(f"Job {pk} has ended; its metrics files are read by the portal.")
        if not isinstance(request.data, list):
            raise ParseError("The body must be a JSON array of metric records.")
        parsed = ingest.parse_batch(request.data)
        if parsed.errors:
            portal_metrics.METRIC_POINTS_REFUSED.labels("invalid").inc(len(parsed.errors))
        if parsed.errors and not parsed.records:
            raise ValidationError({"records": ["No valid records.", *parsed.errors[:20]]})
        try:
            result = ingest.ingest_together(job, parsed.records, nbytes=len(request.body))
        except ingest.QuotaExceeded as exc:
            raise QuotaExceeded(f"{exc} Nothing of this batch was stored.") from None
        return Response(
            {
                "inserted": result.inserted,
                "duplicates": result.duplicates,
                "rejected": parsed.errors[:20],
            }
        )
