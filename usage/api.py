"""``GET /api/v1/usage/``: usage from the scheduler's accounting (usage/hours.py)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, views
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from common.api_errors import RefuseNul
from usage import hours as usage


class UsageRowSerializer(serializers.Serializer):
    month = serializers.CharField(help_text="YYYY-MM, of each run's start")
    user = serializers.CharField()
    account = serializers.CharField(help_text="The Slurm account (the cluster's default if none)")
    cluster = serializers.CharField()
    jobs = serializers.IntegerField()
    gpu_hours = serializers.FloatField()
    cpu_hours = serializers.FloatField()
    wall_hours = serializers.FloatField()


USAGE_FILTERS = [
    OpenApiParameter("from", str, description="First month, YYYY-MM."),
    OpenApiParameter("to", str, description="Last month, YYYY-MM (included)."),
    OpenApiParameter("user", str, description="Staff: one user's usage."),
    OpenApiParameter("cluster", str, description="One cluster's."),
]


class UsageView(RefuseNul, views.APIView):
    """GPU-hours, CPU-hours and wall hours per month, user, account and cluster."""

    @extend_schema(
        summary="Usage from accounting",
        description="Every run of your jobs (staff: everyone's; every attempt of a requeued "
        "job) summed per month, user, Slurm account and cluster: GPUs × elapsed (GPU-hours), "
        "CPUs × elapsed, elapsed. Read from the scheduler's accounting when a job ends.",
        parameters=USAGE_FILTERS,
        responses={200: UsageRowSerializer(many=True)},
    )
    def get(self, request):
        rows, errors = usage.query(request.user, request.query_params)
        if errors:
            raise ValidationError({name: [why] for name, why in errors.items()})
        data = [
            {
                "month": r.month.strftime("%Y-%m"),
                "user": r.user,
                "account": r.account,
                "cluster": r.cluster,
                "jobs": r.jobs,
                "gpu_hours": round(r.gpu_hours, 6),
                "cpu_hours": round(r.cpu_hours, 6),
                "wall_hours": round(r.wall_hours, 6),
            }
            for r in rows
        ]
        return Response(UsageRowSerializer(data, many=True).data)
