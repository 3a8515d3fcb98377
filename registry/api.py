"""The registry's REST API (``/api/v1/models/``), for the pages' scripts, ``portal models``
and programs: models a person sees (theirs and their projects'), a model's versions and
aliases, a version's manifest; registering a run's files; setting, protecting and
removing aliases. Thin: the rules are service.py's, with its messages and statuses."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import APIException, NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api_errors import RefuseNul
from jobs.models import Job
from registry import service
from registry.models import MAX_NAME_CHARS, ModelAlias, ModelVersion, RegisteredModel


class Refused(APIException):
    """A registry rule said no, in the API's one error format with the rule's status."""

    def __init__(self, error: service.RegistryError):
        super().__init__(error.message, error.code.lower())
        self.status_code = error.status


def version_dict(version: ModelVersion, *, manifest: bool = False) -> dict[str, Any]:
    answer = {
        "model": version.model_id,
        "name": version.model.name,
        "version": version.version,
        "status": version.status,
        "status_message": version.status_message,
        "cluster": version.cluster.name,
        "path": version.path,
        "source": version.source,
        "job": version.job_id,
        "run_id": version.run.run_id if version.run else None,
        "step": version.step,
        "metrics": version.metrics,
        "registered_by": version.registered_by.get_username() if version.registered_by else None,
        "total_bytes": version.total_bytes,
        "files": len(version.manifest),
        "manifest_sha256": version.manifest_sha256,
        "aliases": sorted(a.alias for a in version.aliases.all()),
        "description": version.description,
        "created_at": version.created_at.isoformat(),
    }
    if manifest:
        answer["manifest"] = [
            {"path": p, "bytes": size, "sha256": digest} for p, size, digest in version.manifest
        ]
    return answer


def model_dict(model: RegisteredModel, *, versions: bool = False) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "id": model.pk,
        "name": model.name,
        "owner": model.owner.get_username(),
        "project": model.project.name if model.project else None,
        "project_id": model.project_id,
        "description": model.description,
        "aliases": [
            {"alias": a.alias, "version": a.version.version, "protected": a.protected}
            for a in model.aliases.all()
        ],
        "updated_at": model.updated_at.isoformat(),
    }
    if versions:
        answer["versions"] = [version_dict(v) for v in model.versions.all()[:200]]
    else:
        answer["version_count"] = getattr(model, "version_count", None)
    return answer


def _models(request):
    return (
        service.visible(request.user)
        .select_related("owner", "project")
        .prefetch_related(Prefetch("aliases", ModelAlias.objects.select_related("version")))
    )


def _model(request, pk: int) -> RegisteredModel:
    found = (
        _models(request)
        .prefetch_related(
            Prefetch(
                "versions",
                ModelVersion.objects.select_related(
                    "model", "cluster", "run", "registered_by"
                ).prefetch_related("aliases"),
            )
        )
        .filter(pk=pk)
        .first()
    )
    if found is None:
        raise NotFound("No such model.")
    return found


class ModelsView(RefuseNul, APIView):
    @extend_schema(
        summary="List the models you see",
        operation_id="v1_models_list",
        description="Yours and your projects' (`?project=ID`: one project's).",
        parameters=[OpenApiParameter("project", int, required=False)],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        found = _models(request).annotate(version_count=Count("versions"))
        project = request.query_params.get("project")
        if project:
            found = found.filter(project_id=int(project) if project.isdigit() else -1)
        return Response({"results": [model_dict(m) for m in found.order_by("name")[:500]]})

    @extend_schema(
        summary="Register a run's files as a model version",
        operation_id="v1_models_register",
        description="`job` (one of yours), `path` (absolute, or relative to the job's work "
        "directory), `name` (the model; made in the job's project, or yours, if new), "
        "optional `description`. Answers 201 with the version, `PENDING_REGISTRATION` until "
        "its manifest is read on the cluster as you.",
        request=OpenApiTypes.OBJECT,
        responses={201: OpenApiTypes.OBJECT},
    )
    def post(self, request):
        body = request.data if isinstance(request.data, dict) else {}
        try:
            version = register(request.user, body)
        except service.RegistryError as exc:
            raise Refused(exc) from None
        version = ModelVersion.objects.select_related(
            "model", "cluster", "run", "registered_by"
        ).get(pk=version.pk)
        return Response(version_dict(version), status=status.HTTP_201_CREATED)


def register(user: Any, body: dict) -> ModelVersion:
    """A version of ``body['name']`` from ``body['path']`` of the person's job ``body['job']``
    (the REST API's and the run page's registration)."""
    raw_job, path = body.get("job"), body.get("path")
    if isinstance(raw_job, str) and raw_job.isdigit() and len(raw_job) < 12:
        raw_job = int(raw_job)
    name = body.get("name")
    if not isinstance(raw_job, int) or isinstance(raw_job, bool):
        raise service.RegistryError(service.INVALID, "job is the id of one of your jobs.")
    if not isinstance(path, str) or not path or not isinstance(name, str):
        raise service.RegistryError(service.INVALID, "path and name are text.")
    description = body.get("description") or ""
    if not isinstance(description, str):
        raise service.RegistryError(service.INVALID, "description is text.")
    job = Job.objects.filter(pk=raw_job, owner_id=user.pk).exclude(work_dir="").first()
    if job is None:
        raise service.RegistryError(service.NOT_FOUND, "No such job of yours with files.")
    if not path.startswith("/"):
        path = f"{job.work_dir.rstrip('/')}/{path}"
    files = service.files_of(job, path)
    service.check_name(name)
    model = RegisteredModel.namespace(user.pk, job.project_id).filter(name=name).first()
    if model is None:
        model = service.create_model(user, job.project_id, name)
    return service.register(user, model, files, source=path, description=description[:5000])


class ModelView(RefuseNul, APIView):
    @extend_schema(
        summary="A model with its versions",
        operation_id="v1_models_get",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, pk: int):
        return Response(model_dict(_model(request, pk), versions=True))


class VersionView(RefuseNul, APIView):
    @extend_schema(
        summary="A version with its manifest",
        operation_id="v1_models_version_get",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, pk: int, version: int):
        model = _model(request, pk)
        found = next((v for v in model.versions.all() if v.version == version), None)
        if found is None:
            raise NotFound("No such version.")
        return Response(version_dict(found, manifest=True))


class AliasView(RefuseNul, APIView):
    @extend_schema(
        summary="Set (or move) an alias",
        operation_id="v1_models_alias_set",
        description="`version` (a number); `protected` (true/false, the project's managers "
        "only). Members set an alias; a protected one is moved by the managers only.",
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT},
    )
    def put(self, request, pk: int, alias: str):
        model = _model(request, pk)
        body = request.data if isinstance(request.data, dict) else {}
        try:
            if not service.may_change(request.user, model):
                raise service.RegistryError(
                    service.PERMISSION, "Setting an alias takes a member's role in the project."
                )
            alias = service.check_alias(alias[:MAX_NAME_CHARS])
            if "version" in body:
                version = service.version_of(model, body["version"])
                service.set_alias(request.user, model, alias, version)
            protected = body.get("protected")
            if protected is not None:
                if not isinstance(protected, bool):
                    raise service.RegistryError(service.INVALID, "protected is true or false.")
                service.protect_alias(request.user, model, alias, protected)
        except service.RegistryError as exc:
            raise Refused(exc) from None
        return Response(model_dict(_model(request, pk), versions=True))

    @extend_schema(
        summary="Remove an alias",
        operation_id="v1_models_alias_delete",
        request=None,
        responses={204: None},
    )
    def delete(self, request, pk: int, alias: str):
        model = _model(request, pk)
        try:
            if not service.may_change(request.user, model):
                raise service.RegistryError(
                    service.PERMISSION, "Removing an alias takes a member's role in the project."
                )
            service.delete_alias(request.user, model, alias)
        except service.RegistryError as exc:
            raise Refused(exc) from None
        return Response(status=status.HTTP_204_NO_CONTENT)
