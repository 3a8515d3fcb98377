"""The API of imports: ``POST /api/v1/imports/`` an archive (multipart ``file``, or the
raw body with ``?filename=``), ``GET /api/v1/imports/`` a person's, ``GET …/<id>/`` one
with its report (what came in, what did not and why)."""

from __future__ import annotations

from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import FileUploadParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common import marks
from tracking import uploads
from tracking.models import RunImport


class RawArchiveParser(FileUploadParser):
    """The body is the archive; its name from ``?filename=`` (else "upload")."""

    media_type = "*/*"

    def get_filename(self, stream, media_type, parser_context):
        request = parser_context["request"]
        return (
            request.GET.get("filename")
            or super().get_filename(stream, media_type, parser_context)
            or "upload"
        )


class RunImportSerializer(serializers.Serializer):
    """RunImport.json(), for the schema."""

    id = serializers.IntegerField()
    filename = serializers.CharField()
    size = serializers.IntegerField()
    state = serializers.ChoiceField(choices=RunImport.State.choices)
    is_final = serializers.BooleanField()
    message = serializers.CharField()
    report = serializers.DictField(
        help_text="imported, already, refused, points, jobs (ids), messages (why not), "
        "skipped, skipped_entries"
    )
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


IMPORT = RunImportSerializer
DETAIL = inline_serializer("ImportRefused", {"detail": serializers.CharField()})


def archive_limit() -> int:
    """An archive of runs and its form around it (common/marks.py)."""
    return int(settings.PORTAL_IMPORT_MAX_UPLOAD_BYTES) + marks.FORM_OVERHEAD


class ImportListView(APIView):
    parser_classes = [MultiPartParser, RawArchiveParser]
    body_limit = staticmethod(archive_limit)

    @extend_schema(
        summary="Your imports of runs, newest first (at most 100)",
        operation_id="v1_imports_list",
        responses=inline_serializer("RunImports", {"results": RunImportSerializer(many=True)}),
    )
    def get(self, request: Request) -> Response:
        mine = RunImport.objects.filter(owner=request.user.pk)[:100]
        return Response({"results": [i.json() for i in mine]})

    @extend_schema(
        summary="Import runs: an archive of mlruns, mlflow.db, W&B offline runs, event files",
        parameters=[OpenApiParameter("filename", str, description="the archive's name")],
        request={
            "application/octet-stream": OpenApiTypes.BINARY,
            "multipart/form-data": inline_serializer(
                "ImportUpload", {"file": serializers.FileField()}
            ),
        },
        responses={202: IMPORT, 400: DETAIL, 413: DETAIL},
    )
    def post(self, request: Request) -> Response:
        try:
            uploads.check_size(int(request.META.get("CONTENT_LENGTH") or 0))
        except uploads.Refused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        upload = request.FILES.get("file")
        if upload is None:
            return Response(
                {"detail": "Send the archive as the multipart field 'file', or as the body."},
                status=status.HTTP_400_BAD_REQUEST,
            )
        name = request.query_params.get("filename") or upload.name or "upload"
        try:
            run_import = uploads.accept(request.user, upload, name, upload.size)
        except uploads.Refused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(run_import.json(), status=status.HTTP_202_ACCEPTED)


class ImportDetailView(APIView):
    @extend_schema(summary="One of your imports, with its report", responses={200: IMPORT})
    def get(self, request: Request, pk: int) -> Response:
        run_import = get_object_or_404(RunImport, pk=pk, owner=request.user.pk)
        return Response(run_import.json())
