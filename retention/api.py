"""Retention's REST API: a person's or a project's policy, and a run's plans (a dry run
asked for, read, applied). Thin: service.py holds the rules."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api_errors import Refused, RefuseNul
from jobs.models import Job
from projects import access
from retention import service
from retention.models import Plan, Policy


def _policy_dict(policy: Policy | None, project_id: int | None) -> dict[str, Any]:
    if policy is None:
        return {"project": project_id, "set": False}
    return {
        "project": policy.project_id,
        "set": True,
        **{k: v for k, v in policy.snapshot().items() if k != "policy"},
        "updated_at": policy.updated_at.isoformat(),
    }


def _project(request: Request) -> int | None:
    raw = request.query_params.get("project")
    if raw in (None, ""):
        return None
    try:
        project_id = int(raw)
    except ValueError:
        raise NotFound("No such project.") from None
    if not access.may_see_project(request.user, project_id):
        raise NotFound("No such project.")
    return project_id


class PolicyView(RefuseNul, APIView):
    """Your retention policy, or a project's (``?project=ID``; its managers change it)."""

    @extend_schema(
        summary="Read a retention policy",
        parameters=[OpenApiParameter("project", int, required=False)],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        project_id = _project(request)
        where = {"project_id": project_id} if project_id else {"owner_id": request.user.pk}
        return Response(_policy_dict(Policy.objects.filter(**where).first(), project_id))

    @extend_schema(
        summary="Set a retention policy",
        description="Fields: keep_best, metric, mode (min|max), keep_latest, patterns. "
        "Those left out keep their values.",
        parameters=[OpenApiParameter("project", int, required=False)],
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT},
    )
    def put(self, request):
        project_id = _project(request)
        try:
            policy = service.set_policy(request.user, project_id, request.data)
        except service.RetentionError as exc:
            raise Refused(exc) from None
        return Response(_policy_dict(policy, project_id))


def _job(request: Request, pk: int) -> Job:
    job = Job.objects.visible_to(request.user).filter(pk=pk).first()
    if job is None:
        raise NotFound("No such job.")
    return job


class JobPlansView(RefuseNul, APIView):
    """A run's retention plans, newest first; POST asks for a dry run (the run's owner)."""

    @extend_schema(summary="List a run's retention plans", responses={200: OpenApiTypes.OBJECT})
    def get(self, request, pk: int):
        job = _job(request, pk)
        plans = [p.as_dict() for p in job.retention_plans.all()[:20]]
        return Response({"results": plans})

    @extend_schema(
        summary="Ask for a retention dry run",
        description="The run's policy (its project's, else yours), or the fields sent "
        "over it. Answers 202 with the plan, state `listing`; read it until `ready`.",
        request=OpenApiTypes.OBJECT,
        responses={202: OpenApiTypes.OBJECT},
    )
    def post(self, request, pk: int):
        job = _job(request, pk)
        try:
            plan = service.ask(request.user, job, request.data or None)
        except service.RetentionError as exc:
            raise Refused(exc) from None
        return Response(plan.as_dict(), status=status.HTTP_202_ACCEPTED)


def _plan(request: Request, pk: int) -> Plan:
    plan = Plan.objects.select_related("job").filter(pk=pk).first()
    if plan is None or not Job.objects.visible_to(request.user).filter(pk=plan.job_id).exists():
        raise NotFound("No such plan.")
    return plan


class PlanView(RefuseNul, APIView):
    @extend_schema(summary="Read a retention plan", responses={200: OpenApiTypes.OBJECT})
    def get(self, request, pk: int):
        return Response(_plan(request, pk).as_dict())


class ApplyView(RefuseNul, APIView):
    @extend_schema(
        summary="Apply a retention plan",
        description="Deletes, as the run's owner, what the dry run listed and a fresh "
        "listing still would. Answers 202; the plan ends `applied` with what was freed.",
        request=None,
        responses={202: OpenApiTypes.OBJECT},
    )
    def post(self, request, pk: int):
        try:
            plan = service.apply(request.user, _plan(request, pk))
        except service.RetentionError as exc:
            raise Refused(exc) from None
        return Response(plan.as_dict(), status=status.HTTP_202_ACCEPTED)
