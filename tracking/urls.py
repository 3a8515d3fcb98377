from django.urls import path
from django.views.generic import RedirectView

from tracking import import_views, views

# Beside the job's metrics upload (``.../metrics/ingest/``), so a job finds it from the one
# URL it is given: MLFLOW_TRACKING_URI is PORTAL_METRICS_URL with ``ingest/`` replaced by
# ``mlflow`` (schedulers/on_node/wrapper.sh).
urlpatterns = [
    path(
        "api/v1/jobs/<int:pk>/metrics/mlflow/api/2.0/mlflow/<path:endpoint>",
        views.api,
        name="mlflow-api",
    ),
    # MLflow's client prints "View run at <tracking URI>/#/experiments/..." in the job's
    # log: that link opens the job's page.
    path(
        "api/v1/jobs/<int:pk>/metrics/mlflow/",
        RedirectView.as_view(pattern_name="job-detail"),
        name="mlflow-ui",
    ),
    # Runs brought in from MLflow, W&B and TensorBoard (import_views.py).
    path("api/v1/imports/", import_views.ImportListView.as_view(), name="api-imports"),
    path("api/v1/imports/<int:pk>/", import_views.ImportDetailView.as_view(), name="api-import"),
]
