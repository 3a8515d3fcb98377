"""The REST API's addresses (``/api/v1/``), assembled on the top floor from each app's
views: the job API with its metrics actions mixed in (metrics/views.py), experiments,
usage, comparisons, the registry and retention beside it. No app below imports another's API to be reachable."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from endpoints import api as endpoints
from experiments.api import ExperimentViewSet
from jobs.api import ssh as ssh_api
from jobs.api import views as api
from metrics import views as metrics
from metrics.compare.api import CompareView
from registry import api as registry
from retention import api as retention
from usage.api import UsageView


class JobViewSet(api.JobViewSet, metrics.MetricsActions):
    __doc__ = api.JobViewSet.__doc__


router = DefaultRouter()
router.register("containers", api.ContainerViewSet, basename="api-container")
router.register("apps", api.SessionAppViewSet, basename="api-app")
router.register("clusters", api.ClusterViewSet, basename="api-cluster")
router.register("jobs", JobViewSet, basename="api-job")
router.register("experiments", ExperimentViewSet, basename="api-experiment")
router.register("ssh-keys", ssh_api.SSHKeyViewSet, basename="api-ssh-key")

urlpatterns = [
    path(
        "jobs/<int:pk>/metrics/ingest/",
        metrics.MetricIngestView.as_view(),
        name="metrics-upload",
    ),
    path("jobs/<int:pk>/ssh/", ssh_api.JobSSHView.as_view(), name="api-job-ssh"),
    path("usage/", UsageView.as_view(), name="api-usage"),
    path("compare/", CompareView.as_view(), name="api-compare"),
    path("endpoints/", endpoints.EndpointsView.as_view(), name="api-endpoints"),
    path("endpoints/<int:pk>/", endpoints.EndpointView.as_view(), name="api-endpoint"),
    path("endpoints/<int:pk>/start/", endpoints.StartView.as_view(), name="api-endpoint-start"),
    path("endpoints/<int:pk>/stop/", endpoints.StopView.as_view(), name="api-endpoint-stop"),
    path("endpoint-keys/", endpoints.KeysView.as_view(), name="api-endpoint-keys"),
    path(
        "endpoint-keys/<int:pk>/revoke/",
        endpoints.RevokeView.as_view(),
        name="api-endpoint-key-revoke",
    ),
    path("models/", registry.ModelsView.as_view(), name="api-models"),
    path("models/<int:pk>/", registry.ModelView.as_view(), name="api-model"),
    path(
        "models/<int:pk>/versions/<int:version>/",
        registry.VersionView.as_view(),
        name="api-model-version",
    ),
    path(
        "models/<int:pk>/aliases/<str:alias>/",
        registry.AliasView.as_view(),
        name="api-model-alias",
    ),
    path("jobs/<int:pk>/retention/", retention.JobPlansView.as_view(), name="api-job-retention"),
    path("retention/policy/", retention.PolicyView.as_view(), name="api-retention-policy"),
    path("retention/plans/<int:pk>/", retention.PlanView.as_view(), name="api-retention-plan"),
    path(
        "retention/plans/<int:pk>/apply/",
        retention.ApplyView.as_view(),
        name="api-retention-apply",
    ),
    path("", include(router.urls)),
]
