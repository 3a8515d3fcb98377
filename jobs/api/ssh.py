"""The API of SSH into a running job (jobs/personal_ssh.py): a person's keys, and a
certificate with the way into one job for one of them."""

from __future__ import annotations

import re
from typing import cast

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.models import PersonalKey
from common.api_errors import RefuseNul
from jobs import node_access, personal_ssh
from jobs.models import Job
from projects import access

COMMAND_WORDS_MAX = 64
COMMAND_BYTES_MAX = 16 * 1024
PATH_MAX = 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class PersonalKeySerializer(serializers.ModelSerializer):
    public_key = serializers.CharField(max_length=16 * 1024, trim_whitespace=True)
    name = serializers.CharField(max_length=64, required=False, allow_blank=True)

    class Meta:
        model = PersonalKey
        fields = ["id", "name", "fingerprint", "public_key", "created_at", "last_certified_at"]
        read_only_fields = ["id", "fingerprint", "created_at", "last_certified_at"]


class SSHKeyViewSet(
    RefuseNul,
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Your SSH public keys: the portal certifies one of them, for a while, to SSH into your
    running jobs (POST /api/v1/jobs/{id}/ssh/)."""

    serializer_class = PersonalKeySerializer
    pagination_class = None

    def get_queryset(self):
        return PersonalKey.objects.filter(user_id=cast(int, self.request.user.pk))

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            key = personal_ssh.add_key(
                request.user,
                serializer.validated_data["public_key"],
                serializer.validated_data.get("name", ""),
            )
        except DjangoValidationError as exc:
            raise ValidationError({"public_key": exc.messages}) from None
        return Response(self.get_serializer(key).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance):
        personal_ssh.remove_key(self.request.user, instance)


def _path(name: str, default: str) -> serializers.CharField:
    return serializers.CharField(
        max_length=PATH_MAX, required=False, default=default, help_text=f"{name} on your machine"
    )


class CertificateRequestSerializer(serializers.Serializer):
    key = serializers.IntegerField(
        required=False, min_value=1, max_value=2**63 - 1, help_text="One of your keys, by id."
    )
    public_key = serializers.CharField(
        max_length=16 * 1024, required=False, help_text="Or the public key line itself."
    )
    command = serializers.ListField(
        child=serializers.CharField(max_length=4096, trim_whitespace=False),
        required=False,
        max_length=COMMAND_WORDS_MAX,
        help_text="Run this in the job instead of a shell (each word quoted for you).",
    )
    identity_file = _path("The private key's path", "~/.ssh/id_ed25519")
    certificate_file = _path("Where you keep the certificate", "")
    known_hosts_file = _path("Where you keep the login node's key", "~/.ssh/portal_known_hosts")

    def validate(self, data):
        if "key" not in data and not data.get("public_key"):
            raise ValidationError("Name one of your keys: key (its id) or public_key.")
        for field in ("identity_file", "certificate_file", "known_hosts_file"):
            if _CONTROL.search(data.get(field, "")):
                raise ValidationError({field: "A path on one line, without control characters."})
        if sum(len(w.encode()) for w in data.get("command", [])) > COMMAND_BYTES_MAX:
            raise ValidationError({"command": f"At most {COMMAND_BYTES_MAX} bytes."})
        if any("\x00" in w for w in data.get("command", [])):
            raise ValidationError({"command": "No NUL characters."})
        return data


class JobSSHView(RefuseNul, APIView):
    @extend_schema(
        request=CertificateRequestSerializer,
        responses={
            201: inline_serializer(
                "SSHCertificate",
                {
                    "certificate": serializers.CharField(),
                    "key_id": serializers.CharField(),
                    "valid_before": serializers.DateTimeField(),
                    "host_alias": serializers.CharField(),
                    "ssh_config": serializers.CharField(),
                    "ssh_args": serializers.ListField(child=serializers.CharField()),
                    "known_hosts": serializers.CharField(),
                },
            )
        },
    )
    def post(self, request, pk: int):
        """A short-lived certificate for one of your keys and the way into your running job
        (its allocation, on its node) with your own ssh: ``ssh_config`` for ~/.ssh/config,
        or ``ssh_args`` after ``ssh``. Only the job's owner; refused (403) with the reason
        when the job is not running or its cluster does not take certificates."""
        job = get_object_or_404(
            Job.objects.filter(access.visible_jobs(request.user)).select_related(
                "cluster", "cluster_account"
            ),
            pk=pk,
        )
        data = CertificateRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        asked = data.validated_data
        if not access.may_enter(request.user, job.owner_id):
            raise PermissionDenied("Only the job's owner can SSH into it.")
        try:
            key = personal_ssh.find_key(
                request.user, key_id=asked.get("key"), public_key=asked.get("public_key", "")
            )
            issued = personal_ssh.certify(request.user, job, key)
        except personal_ssh.Refused as exc:
            raise PermissionDenied(str(exc)) from None
        route = issued.route
        certificate_file = asked["certificate_file"] or f"~/.ssh/{route.alias}-cert.pub"
        known_hosts = asked["known_hosts_file"] if issued.known_hosts else ""
        return Response(
            {
                "certificate": issued.certificate,
                "key_id": issued.key_id,
                "valid_before": issued.valid_before,
                "host_alias": route.alias,
                "ssh_config": node_access.ssh_config(
                    route, asked["identity_file"], certificate_file, known_hosts
                ),
                "ssh_args": node_access.ssh_argv(
                    route,
                    asked["identity_file"],
                    certificate_file,
                    known_hosts,
                    command=asked.get("command"),
                )[1:],
                "known_hosts": issued.known_hosts,
            },
            status=status.HTTP_201_CREATED,
        )
