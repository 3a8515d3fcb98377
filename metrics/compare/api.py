"""``GET /api/v1/compare/``: the comparison the page draws (metrics/compare/data.py), as JSON."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import views
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from common.api_errors import RefuseNul
from metrics.compare.data import Options, compare
from metrics.compare.query import BadQuery

DESCRIPTION = """Runs side by side: the jobs `q` matches plus those of `ids` (only ever
among the jobs you may see; staff: everyone's). Answers the table (`runs`, each with the
fields that differ between the runs in `columns`, the equal ones in `same`, and per metric
its `last`, `best` and `best_step`) and one chart per metric (`charts`): every run's curve
and, with `group`, each group's mean with its band, in at most 64 points per curve, read
from per-series summaries, never from the raw points. A bad query is a `400` that says
which term and why; so is a selection of more runs than the portal compares at once
(`PORTAL_COMPARE_MAX_RUNS`, 1,000 by default), with the limit."""

PARAMETERS = [
    OpenApiParameter(
        "q",
        str,
        description="`tag:resnet param.lr<0.01 metric.val_accuracy>0.95 image:SLUG "
        "state:completed cluster:NAME after:2026-11-01 before:… experiment:ID id:1,2,3`; "
        "terms must all hold; `metric.` compares a run's last value.",
    ),
    OpenApiParameter("ids", str, description="Runs to add, by id: `1,2,3`."),
    OpenApiParameter(
        "group",
        str,
        description="`image`, `cluster`, `partition`, `state`, `experiment`, `tag:PREFIX` "
        "(the run's first tag starting with it) or `param.NAME`.",
    ),
    OpenApiParameter("baseline", str, description="A run's id, or `group:VALUE`."),
    OpenApiParameter("x", str, enum=["step", "time"]),
    OpenApiParameter("band", str, enum=["std", "minmax"], description="± std or min–max."),
    OpenApiParameter("sort", str, description="A column: `id`, `param.lr`, `-metric.loss.best`, …"),
]


class CompareView(RefuseNul, views.APIView):
    """Compare runs: the table of what differs and the curves, grouped."""

    @extend_schema(
        summary="Compare runs",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        try:
            options = Options.parse(request.query_params)
            result = compare(request.user, options)
        except BadQuery as exc:
            raise ValidationError({"q": [str(exc)]}) from None
        return Response(result.as_dict())
