"""The REST API of session shares: ``/api/v1/jobs/<id>/shares/`` (list, share) and
``/api/v1/jobs/<id>/shares/<share id>/`` (withdraw). The same rules as the job's page
(proxy/sharing.py records, proxy/access.py decides): a job the person may not see is a
404; seeing it without being its owner (or, to list and withdraw, a manager of its
project or staff) is a 403."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status, views
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response

from jobs.models import Job
from proxy import access, sharing
from proxy.models import SessionLink, SessionShare


class ShareRequest(serializers.Serializer):
    people = serializers.ListField(
        child=serializers.CharField(max_length=150), max_length=sharing.MAX_PEOPLE, default=list
    )
    project = serializers.BooleanField(default=False)
    acts_as_owner = serializers.BooleanField(
        default=False,
        help_text="Needed to share a notebook: whoever opens it acts as you on the cluster.",
    )


class ShareSerializer(serializers.ModelSerializer):
    user = serializers.SerializerMethodField()

    class Meta:
        model = SessionShare
        fields = ["id", "kind", "user", "acts_as_owner", "created_at"]

    def get_user(self, share: SessionShare) -> str | None:
        return share.user.get_username() if share.user is not None else None


def _session(request, job_id: int) -> SessionLink:
    job = get_object_or_404(Job.objects.visible_to(request.user), pk=job_id)
    if not job.has_session:
        raise NotFound(f"Job {job.pk} is a batch job: it has no session to share.")
    session = (
        SessionLink.objects.select_related("job", "job__owner", "job__project", "job__cluster")
        .filter(job=job)
        .first()
    )
    if session is None:
        raise NotFound(f"Job {job.pk} has no session yet: share it once it is submitted.")
    return session


class SharesView(views.APIView):
    @extend_schema(
        summary="A session's shares and who else opened it",
        responses={
            200: inline_serializer(
                "Shares",
                {
                    "shares": ShareSerializer(many=True),
                    "opens": serializers.ListField(child=serializers.DictField()),
                },
            )
        },
    )
    def get(self, request, job_id: int):
        session = _session(request, job_id)
        if not sharing.may_unshare(request.user, session):
            raise PermissionDenied("Only the session's owner, its project's managers and staff.")
        shares = session.shares.select_related("user").exclude(kind=SessionShare.Kind.STAFF)
        opens = [
            {"user": row.username, "at": row.at, "how": row.message}
            for row in access.opens_by_others(session)
        ]
        return Response({"shares": ShareSerializer(shares, many=True).data, "opens": opens})

    @extend_schema(
        summary="Share a running session",
        request=ShareRequest,
        responses={
            201: inline_serializer(
                "Shared",
                {
                    "shared": serializers.ListField(child=serializers.CharField()),
                    "problems": serializers.ListField(child=serializers.CharField()),
                },
            )
        },
    )
    def post(self, request, job_id: int):
        session = _session(request, job_id)
        if not sharing.may_share(request.user, session):
            raise PermissionDenied("Only the session's owner shares it, while it is not closed.")
        incoming = ShareRequest(data=request.data)
        incoming.is_valid(raise_exception=True)
        wanted = incoming.validated_data
        outcome = sharing.share(
            session,
            request.user,
            people=" ".join(wanted["people"]),
            project=wanted["project"],
            acts_as_owner=wanted["acts_as_owner"],
        )
        if not outcome.shared:
            raise ValidationError({"people": outcome.problems or ["Name someone to share with."]})
        body = {"shared": outcome.shared, "problems": outcome.problems}
        return Response(body, status=status.HTTP_201_CREATED)


class ShareView(views.APIView):
    @extend_schema(summary="Withdraw a share", request=None, responses={204: None})
    def delete(self, request, job_id: int, share_id: int):
        session = _session(request, job_id)
        if not sharing.may_unshare(request.user, session):
            raise PermissionDenied("Only the session's owner, its project's managers and staff.")
        if not sharing.unshare(session, request.user, share_id):
            raise NotFound("No such share.")
        return Response(status=status.HTTP_204_NO_CONTENT)
