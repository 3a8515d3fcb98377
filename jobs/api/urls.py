from django.urls import include, path
from rest_framework.routers import DefaultRouter

from jobs.api import ssh as ssh_api
from jobs.api import views as api
from jobs.compare.api import CompareView
from jobs.experiments.api import ExperimentViewSet
from jobs.metrics import views as metrics

router = DefaultRouter()
router.register("containers", api.ContainerViewSet, basename="api-container")
router.register("apps", api.SessionAppViewSet, basename="api-app")
router.register("clusters", api.ClusterViewSet, basename="api-cluster")
router.register("jobs", api.JobViewSet, basename="api-job")
router.register("experiments", ExperimentViewSet, basename="api-experiment")
router.register("ssh-keys", ssh_api.SSHKeyViewSet, basename="api-ssh-key")

urlpatterns = [
    path(
        "jobs/<int:pk>/metrics/ingest/",
        metrics.MetricIngestView.as_view(),
        name="metrics-upload",
    ),
    path("jobs/<int:pk>/ssh/", ssh_api.JobSSHView.as_view(), name="api-job-ssh"),
    path("usage/", api.UsageView.as_view(), name="api-usage"),
    path("compare/", CompareView.as_view(), name="api-compare"),
    path("", include(router.urls)),
]
