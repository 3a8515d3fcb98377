"""REST API of transfers (files/transfers.py does the work, as for the pages): start a copy
between a file-manager folder and a remote, follow it, cancel it; list the remotes a person
may use (names and kinds only: no secret, no option ever leaves the portal)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from clusters.models import Cluster
from common.api_errors import RefuseNul
from files import tasks, transfers
from files.models import Transfer
from jobs.api.views import ERROR, Pages
from projects import roots


def _row(transfer: Transfer) -> dict:
    """A transfer as the API shows it: the page's progress, and what it copies."""
    return {
        "id": transfer.pk,
        "cluster": transfer.cluster.name,
        "direction": transfer.direction,
        "root": transfer.root,
        "path": transfer.folder,
        "remote": transfer.remote_name,
        "remote_path": transfer.remote_path,
        "what": transfers.describe(transfer),
        "created_at": transfer.created_at.isoformat(),
        "started_at": transfer.started_at.isoformat() if transfer.started_at else None,
        "ended_at": transfer.ended_at.isoformat() if transfer.ended_at else None,
        **transfer.status(),
    }


class TransferCreate(serializers.Serializer):
    cluster = serializers.CharField(max_length=64)
    # (DRF's metaclass moves fields out of the class: the serializer's own ``root`` stays)
    root = serializers.CharField(  # type: ignore[assignment]
        max_length=80, help_text="home, scratch or project:<slug>"
    )
    path = serializers.CharField(
        max_length=4096, allow_blank=True, default="", help_text="relative to the root"
    )
    remote = serializers.CharField(max_length=64, help_text="a remote's name (GET remotes/)")
    remote_path = serializers.CharField(max_length=4096, allow_blank=True, default="")
    direction = serializers.ChoiceField(choices=Transfer.Direction.choices)


class TransferViewSet(RefuseNul, viewsets.ViewSet):
    """The person's own transfers (files.transfers.transfers_of: no one sees another's)."""

    pagination_class = Pages
    queryset = Transfer.objects.none()  # tells the schema the id is an integer
    lookup_value_regex = r"[0-9]+"

    def _get(self, pk) -> Transfer:
        try:
            return transfers.transfers_of(self.request.user).select_related("cluster").get(pk=pk)
        except (Transfer.DoesNotExist, ValueError, TypeError):
            raise NotFound("No such transfer.") from None

    @extend_schema(
        summary="List your transfers",
        operation_id="v1_transfers_list",
        responses={200: OpenApiTypes.OBJECT},
    )
    def list(self, request):
        paginator = Pages()
        rows = transfers.transfers_of(request.user).select_related("cluster").order_by("-pk")
        page: list[Transfer] | None = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response([_row(t) for t in page or []])

    @extend_schema(
        summary="One transfer, with its progress and timeline",
        responses={200: OpenApiTypes.OBJECT},
    )
    def retrieve(self, request, pk=None):
        return Response(_row(self._get(pk)))

    @extend_schema(
        summary="Copy a folder to a remote, or a remote's folder into the file manager",
        request=TransferCreate,
        responses={
            201: OpenApiTypes.OBJECT,
            400: OpenApiResponse(ERROR, description="What is wrong; nothing started."),
        },
    )
    def create(self, request):
        asked = TransferCreate(data=request.data)
        asked.is_valid(raise_exception=True)
        data = asked.validated_data
        cluster = get_object_or_404(Cluster, name=data["cluster"], enabled=True)
        try:
            account = roots.account_for(cluster, request.user)
            root = roots.root_named(cluster, account, data["root"])
        except roots.NoAccess as exc:
            raise NotFound(str(exc)) from None
        named = transfers.remotes_for(request.user, cluster).filter(name=data["remote"])
        # (the person's own before the site's of the same name)
        remote_obj = named.filter(owner=request.user).first() or named.first()
        if remote_obj is None:
            raise ValidationError({"remote": "None of your remotes (or the site's) has that name."})
        try:
            transfer = transfers.ask(
                request.user,
                cluster,
                remote_obj,
                data["direction"],
                root.key,
                data["path"],
                data["remote_path"],
            )
        except transfers.Refused as exc:
            raise ValidationError({"detail": str(exc)}) from None
        tasks.start_soon(transfer)
        return Response(_row(transfer), status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Cancel a transfer (rclone stops on the cluster)",
        request=None,
        responses={200: OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        transfer = self._get(pk)
        if not transfer.is_final:
            transfers.cancel(transfer, request.user)
            transfer.refresh_from_db()
        return Response(_row(transfer))


class RemoteViewSet(RefuseNul, viewsets.ViewSet):
    """The remotes a person may copy to and from: their own and the site's."""

    @extend_schema(
        summary="List the remotes you may use",
        operation_id="v1_remotes_list",
        responses={200: OpenApiTypes.OBJECT},
    )
    def list(self, request):
        rows = transfers.remotes_for(request.user).select_related("cluster")
        return Response(
            [
                {
                    "name": r.name,
                    "kind": r.kind,
                    "site": r.owner_id is None,
                    "cluster": r.cluster.name if r.cluster_id else None,
                }
                for r in rows
            ]
        )
