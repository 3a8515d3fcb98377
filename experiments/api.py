"""REST API of experiments: thin, the service and the report do the work."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response

from common.api_errors import RefuseNul
from common.text import quoted
from experiments import report, service, spec
from experiments.models import Experiment
from jobs.api.serializers import JobSerializer
from jobs.api.views import ERROR, Pages
from projects import access

CREATE_DESCRIPTION = """Start an experiment (a hyper-parameter sweep, optionally with K-fold
cross-validation) from its spec: either the spec itself as a JSON object, or
`{"spec": "<YAML or JSON text>"}` (what `portal sweep create sweep.yaml` sends). The spec's
`launch` is a job request as for `POST /api/v1/jobs/` (a batch job); the docs'
experiments page (use/experiments) documents every other key. A refused spec is a `400`
naming each wrong field (`parameters.lr`, `launch.cpus`, …); nothing is created. Answers
`201` with the experiment; its first trials are submitted at once."""


def _summary_schema():
    return OpenApiTypes.OBJECT


class ExperimentViewSet(RefuseNul, viewsets.ViewSet):
    """The user's experiments (staff: everyone's). Another user's is a 404."""

    pagination_class = Pages
    queryset = Experiment.objects.none()  # tells the schema the id is an integer
    lookup_value_regex = r"[0-9]+"

    def _experiments(self) -> QuerySet[Experiment]:
        return Experiment.objects.visible_to(self.request.user).select_related("owner", "cluster")

    def _get(self, pk) -> Experiment:
        try:
            return self._experiments().get(pk=int(pk))
        except (Experiment.DoesNotExist, ValueError, TypeError):
            raise NotFound("No such experiment.") from None

    @extend_schema(
        summary="List your experiments",
        operation_id="v1_experiments_list",
        responses={200: _summary_schema()},
    )
    def list(self, request):
        paginator = Pages()
        page = paginator.paginate_queryset(self._experiments(), request, view=self)
        return paginator.get_paginated_response(report.summaries(list(page or [])))

    @extend_schema(
        summary="Start an experiment",
        description=CREATE_DESCRIPTION,
        request=OpenApiTypes.OBJECT,
        responses={
            201: _summary_schema(),
            400: OpenApiResponse(ERROR, description="Each wrong field and why; nothing created."),
        },
        examples=[
            OpenApiExample(
                "A small random search",
                value={
                    "launch": {"container": "digits-sweep-demo", "partition": "cpu"},
                    "parameters": {"lr": {"type": "float", "low": 0.001, "high": 0.5, "log": True}},
                    "method": "random",
                    "objective": {"metric": "val_accuracy", "goal": "maximize"},
                    "budget": {"max_trials": 8, "max_concurrent": 4},
                },
                request_only=True,
            )
        ],
    )
    def create(self, request):
        body = request.data
        if not isinstance(body, dict):
            raise ValidationError({"spec": ['Send the spec as a JSON object, or {"spec": text}.']})
        source = (
            body["spec"] if isinstance(body.get("spec"), str) and len(body) == 1 else dict(body)
        )
        try:
            experiment = service.create(request.user, source)
        except spec.SpecError as exc:
            raise ValidationError({k: [v] for k, v in exc.errors.items()}) from None
        return Response(report.summary(experiment), status=status.HTTP_201_CREATED)

    @extend_schema(summary="An experiment with its trials", responses={200: _summary_schema()})
    def retrieve(self, request, pk=None):
        return Response(report.detail(self._get(pk)))

    @extend_schema(summary="Cancel an experiment", request=None, responses={202: _summary_schema()})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """No new trials; running and waiting trials are cancelled (202; 200 if it had ended)."""
        experiment = self._get(pk)
        if not access.may_act(request.user, experiment.owner_id):
            raise PermissionDenied("Only the experiment's owner (or staff) may cancel it.")
        started = service.cancel(experiment)
        experiment.refresh_from_db()
        return Response(
            report.summary(experiment), status=status.HTTP_202_ACCEPTED if started else 200
        )

    @extend_schema(
        summary="Run a trial's configuration again",
        request=serializers.Serializer,  # {"trial": N}, optional
        responses={
            201: JobSerializer,
            400: OpenApiResponse(ERROR),
            403: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="Not your experiment: nothing is launched. The error, and under "
                "`launch` the job request that would run (to read, and send to "
                "`POST /api/v1/jobs/` as your own).",
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def relaunch(self, request, pk=None):
        """One ordinary job with trial `trial`'s parameters (default: the best trial), run
        as you: only the experiment's owner may (staff get a 403 with the request to read)."""
        experiment = self._get(pk)
        wanted = request.data.get("trial") if isinstance(request.data, dict) else None
        trial = service.trial_to_relaunch(experiment, wanted)
        if trial is None and wanted is None:
            raise ValidationError({"trial": ["No trial has completed with a score yet."]})
        if trial is None:
            raise ValidationError(
                {"trial": [f"Experiment {experiment.pk} has no trial {quoted(wanted)}."]}
            )
        try:
            job = service.relaunch(trial, request.user)
        except service.NotTheOwner as exc:
            error = {"status": 403, "code": "not_owner", "message": str(exc), "fields": {}}
            return Response(
                {"error": error, "launch": service.launch_request(trial)},
                status=status.HTTP_403_FORBIDDEN,
            )
        return Response(JobSerializer(job, context={"request": request}).data, status=201)
