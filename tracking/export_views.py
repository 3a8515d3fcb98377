"""Downloads of the exports out of the portal (tracking/exports.py): for the pages
(session login) and the same under ``/api/v1/`` (a token's read scope). Thin: who may see
what, the query's errors, the streamed response."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import views
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import BaseContentNegotiation

from common.api_errors import RefuseNul
from common.marks import streaming_view
from common.streams import for_server
from jobs.models import Job
from metrics.compare.api import PARAMETERS as COMPARE_PARAMETERS
from metrics.compare.data import Options
from metrics.compare.query import BadQuery
from tracking import exports


def download(request, made: exports.Download) -> StreamingHttpResponse:
    """``made`` streamed as an attachment. Under ASGI its body goes out a piece at a time
    (for_server), never read whole first."""
    http: HttpRequest = getattr(request, "_request", request)  # DRF's request wraps Django's
    response = StreamingHttpResponse(for_server(http, made.body), content_type=made.content_type)
    response["Content-Disposition"] = content_disposition_header(True, made.filename)
    return response


def _visible_job(request, pk: int) -> Job:
    return get_object_or_404(Job.objects.visible_to(request.user), pk=pk)


# -- pages ------------------------------------------------------------------------------------


@streaming_view
@login_required
def job_tensorboard(request, pk: int):
    """Every series of a job as one TensorBoard event file."""
    return download(request, exports.job_tensorboard(_visible_job(request, pk)))


def _compared(request, export):
    try:
        jobs = exports.comparison_jobs(request.user, Options.parse(request.GET))
    except BadQuery as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    return download(request, export(jobs))


@streaming_view
@login_required
def compare_csv(request):
    """The runs of a comparison (the page's ``q``, ``ids``, ``baseline``) as one CSV."""
    return _compared(request, exports.comparison_csv)


@streaming_view
@login_required
def compare_tensorboard(request):
    """The runs of a comparison as a .tar.gz of TensorBoard run folders, one per job."""
    return _compared(request, exports.comparison_tensorboard)


@streaming_view
@login_required
def my_mlruns(request):
    """Every run of one's own (with metrics) as an MLflow ``mlruns`` folder, .tar.gz."""
    return download(request, exports.mlruns(request.user))


# -- REST API ----------------------------------------------------------------------------------


class IgnoreAccept(BaseContentNegotiation):
    """A download is what it is whatever ``Accept`` says; its errors are JSON."""

    def select_parser(self, request, parsers):
        return parsers[0]

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class ExportView(RefuseNul, views.APIView):
    content_negotiation_class = IgnoreAccept


COMPARE_SELECTION = [p for p in COMPARE_PARAMETERS if p.name in ("q", "ids", "baseline")]
ARCHIVE = {(200, "application/gzip"): OpenApiTypes.BINARY}


class JobTensorBoardView(ExportView):
    @extend_schema(
        summary="A job's metrics as a TensorBoard event file",
        description="Every series of the job (other ranks as `rank<n>/<key>`, later "
        "attempts as `attempt<n>/<key>`, system samples as `sys/...`), each point a scalar "
        "with its step and wall time.",
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY},
    )
    def get(self, request, pk: int):
        return download(request, exports.job_tensorboard(_visible_job(request, pk)))


class CompareExportView(ExportView):
    export = staticmethod(exports.comparison_csv)

    def get(self, request):
        try:
            jobs = exports.comparison_jobs(request.user, Options.parse(request.query_params))
        except BadQuery as exc:
            raise ValidationError({"q": [str(exc)]}) from None
        return download(request, self.export(jobs))


class CompareCsvView(CompareExportView):
    @extend_schema(
        summary="A comparison's runs as CSV",
        description="Every point of the runs `q`, `ids` and `baseline` select (as "
        "`/api/v1/compare/` does): job, name, metric, rank, attempt, step, time, value.",
        parameters=COMPARE_SELECTION,
        responses={(200, "text/csv"): OpenApiTypes.STR},
    )
    def get(self, request):
        return super().get(request)


class CompareTensorBoardView(CompareExportView):
    export = staticmethod(exports.comparison_tensorboard)

    @extend_schema(
        summary="A comparison's runs as TensorBoard runs",
        description="A .tar.gz of `portal-runs/<job id>-<name>/events.out.tfevents...`, "
        "one run folder per job the comparison selects.",
        parameters=COMPARE_SELECTION,
        responses=ARCHIVE,
    )
    def get(self, request):
        return super().get(request)


class MlrunsView(ExportView):
    @extend_schema(
        summary="Your runs as an MLflow mlruns folder",
        description="Every job of yours with metrics or MLflow runs, as MLflow's file "
        "store (`mlruns/<experiment>/<run>/...`) in a .tar.gz: open it with `mlflow ui` "
        "(MLflow 3: with `MLFLOW_ALLOW_FILE_STORE=true`) or MLflow's client.",
        responses=ARCHIVE,
    )
    def get(self, request):
        return download(request, exports.mlruns(request.user))
