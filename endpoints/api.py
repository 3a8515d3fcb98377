"""Endpoints' REST API: a person's endpoints (and their projects'), serving a version,
starting and stopping; API keys (the secret shown once), revoking. Thin: service.py
holds the rules."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api_errors import Refused, RefuseNul
from endpoints import service
from endpoints.models import Endpoint, EndpointKey, meter_figures
from registry import service as registry
from registry.models import ModelVersion


def endpoint_dict(endpoint: Endpoint, streamed: dict[str, float] | None = None) -> dict[str, Any]:
    """``streamed``: its meter's figures when the caller read them (a list: in one query)."""
    version = endpoint.version
    streamed = endpoint.streamed() if streamed is None else streamed
    return {
        "id": endpoint.pk,
        "name": endpoint.name,
        "url": endpoint.url,
        "kind": endpoint.kind,
        "state": endpoint.state,
        "message": endpoint.message,
        "owner": endpoint.owner.get_username(),
        "project": endpoint.project.name if endpoint.project else None,
        "model": {"id": version.model_id, "name": version.model.name, "version": version.version},
        "job": endpoint.job_id,
        "partition": endpoint.partition,
        "cpus": endpoint.cpus,
        "memory_gb": endpoint.memory_gb,
        "gpus": endpoint.gpus,
        "time_limit_minutes": endpoint.time_limit_minutes,
        "idle_minutes": endpoint.idle_minutes,
        "last_request_at": endpoint.last_request_at.isoformat()
        if endpoint.last_request_at
        else None,
        "model_name": endpoint.model_name,
        "log_tail": endpoint.log_tail,
        "traffic": {
            "since": endpoint.running_since.isoformat() if endpoint.running_since else None,
            "requests": endpoint.requests,
            "errors": endpoint.errors,
            "response_ms": endpoint.response_ms,
            "total_ms": endpoint.total_ms,
            "read_at": endpoint.traffic_at.isoformat() if endpoint.traffic_at else None,
            # a language model's streams, as the endpoint meter last reported them
            **{
                name: streamed.get(name) for name in ("ttft_ms", "ttft_p95_ms", "tokens_per_second")
            },
        },
    }


def key_dict(key: EndpointKey) -> dict[str, Any]:
    return {
        "id": key.pk,
        "name": key.name,
        "prefix": key.prefix,
        "project": key.project_id,
        "endpoints": "all" if key.all_endpoints else [e.pk for e in key.endpoints.all()],
        "rate": key.rate,
        "expires_at": key.expires_at.isoformat(),
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
        "live": key.is_live,
    }


def _endpoint(request, pk: int) -> Endpoint:
    found = (
        service.visible(request.user)
        .select_related("owner", "project", "version__model", "job")
        .filter(pk=pk)
        .first()
    )
    if found is None:
        raise NotFound("No such endpoint.")
    return found


def _int(body: dict, name: str, default: int | None = None) -> int | None:
    value = body.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(service.EndpointError(f"{name} is a whole number."))
    return value


class EndpointsView(RefuseNul, APIView):
    @extend_schema(
        summary="List the endpoints you see",
        operation_id="v1_endpoints_list",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        found = service.visible(request.user).select_related(
            "owner", "project", "version__model", "job"
        )
        rows = list(found[:500])
        meters = meter_figures(
            [e.job_id for e in rows if e.job_id is not None and e.kind == Endpoint.Kind.OPENAI]
        )
        return Response({"results": [endpoint_dict(e, meters.get(e.job_id, {})) for e in rows]})

    @extend_schema(
        summary="Serve a model version",
        operation_id="v1_endpoints_create",
        description="`model` (a model's id), `version` (its number), `name` (lower-case "
        "letters, digits, '-'); optional `kind` (mlflow|openai), `partition`, `cpus`, "
        "`memory_gb`, `gpus`, `time_limit_minutes`, `idle_minutes`. Made stopped: "
        "`POST .../start/` starts it.",
        request=OpenApiTypes.OBJECT,
        responses={201: OpenApiTypes.OBJECT},
    )
    def post(self, request):
        body = request.data if isinstance(request.data, dict) else {}
        model_id, number = _int(body, "model"), _int(body, "version")
        model = registry.visible(request.user).filter(pk=model_id or 0).first()
        version = (
            ModelVersion.objects.filter(model=model, version=number or 0)
            .select_related("model", "job", "cluster")
            .first()
            if model
            else None
        )
        if version is None:
            raise NotFound("No such model version.")
        try:
            fields = service.checked_fields(body)
            endpoint = service.serve(request.user, version, str(body.get("name", "")), **fields)
        except service.EndpointError as exc:
            raise Refused(exc) from None
        return Response(endpoint_dict(_endpoint(request, endpoint.pk)), status=201)


class EndpointView(RefuseNul, APIView):
    @extend_schema(
        summary="An endpoint", operation_id="v1_endpoints_get", responses={200: OpenApiTypes.OBJECT}
    )
    def get(self, request, pk: int):
        return Response(endpoint_dict(_endpoint(request, pk)))


class StartView(RefuseNul, APIView):
    @extend_schema(
        summary="Start an endpoint",
        operation_id="v1_endpoints_start",
        request=None,
        responses={202: OpenApiTypes.OBJECT},
    )
    def post(self, request, pk: int):
        endpoint = _endpoint(request, pk)
        try:
            service.request_start(request.user, endpoint)
        except service.EndpointError as exc:
            raise Refused(exc) from None
        return Response(endpoint_dict(_endpoint(request, pk)), status=status.HTTP_202_ACCEPTED)


class StopView(RefuseNul, APIView):
    @extend_schema(
        summary="Stop an endpoint",
        operation_id="v1_endpoints_stop",
        request=None,
        responses={200: OpenApiTypes.OBJECT},
    )
    def post(self, request, pk: int):
        endpoint = _endpoint(request, pk)
        if not service.may_manage(request.user, endpoint):
            raise Refused(service.EndpointError("Only the endpoint's owner stops it.", 403))
        service.stop(endpoint, "Stopped by its owner.")
        return Response(endpoint_dict(_endpoint(request, pk)))


class KeysView(RefuseNul, APIView):
    @extend_schema(
        summary="List your endpoint keys",
        operation_id="v1_endpoint_keys_list",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        keys = EndpointKey.objects.filter(owner=request.user).prefetch_related("endpoints")
        return Response({"results": [key_dict(k) for k in keys[:500]]})

    @extend_schema(
        summary="Make an endpoint key",
        operation_id="v1_endpoint_keys_create",
        description="`name`; optional `days` (1-365, default 90), `rate` (requests a "
        "second, 1-1000, default 10), `project` (a project's key: its managers), "
        "`endpoints` (ids; default: every endpoint of yours, or of the project). The "
        "answer's `key` is the secret, shown this once.",
        request=OpenApiTypes.OBJECT,
        responses={201: OpenApiTypes.OBJECT},
    )
    def post(self, request):
        body = request.data if isinstance(request.data, dict) else {}
        endpoints = body.get("endpoints") or []
        if not isinstance(endpoints, list) or not all(
            isinstance(e, int) and not isinstance(e, bool) for e in endpoints
        ):
            raise Refused(service.EndpointError("endpoints is a list of endpoint ids."))
        try:
            key, secret = service.issue_key(
                request.user,
                body.get("name", ""),
                days=_int(body, "days", 90) or 0,
                rate=_int(body, "rate", 10) or 0,
                project_id=_int(body, "project"),
                endpoint_ids=endpoints,
            )
        except service.EndpointError as exc:
            raise Refused(exc) from None
        return Response({**key_dict(key), "key": secret}, status=201)


class RevokeView(RefuseNul, APIView):
    @extend_schema(
        summary="Revoke an endpoint key",
        operation_id="v1_endpoint_keys_revoke",
        request=None,
        responses={200: OpenApiTypes.OBJECT},
    )
    def post(self, request, pk: int):
        key = EndpointKey.objects.filter(pk=pk).first()
        if key is None or not (key.owner_id == request.user.pk or key.project_id is not None):
            raise NotFound("No such key.")
        try:
            service.revoke_key(request.user, key)
        except service.EndpointError as exc:
            raise Refused(exc) from None
        key.refresh_from_db()
        return Response(key_dict(key))
