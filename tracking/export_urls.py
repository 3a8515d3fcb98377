"""The exports' downloads (tracking/export_views.py), included at the site's root:
the pages' beside the job page and the comparison page, the API's under ``api/v1/``."""

from django.urls import path

from common.marks import streaming_view
from tracking import export_views as views

urlpatterns = [
    path(
        "jobs/<int:pk>/metrics/export/tensorboard/",
        views.job_tensorboard,
        name="job-metrics-export-tensorboard",
    ),
    path("compare/export/csv/", views.compare_csv, name="compare-export-csv"),
    path(
        "compare/export/tensorboard/",
        views.compare_tensorboard,
        name="compare-export-tensorboard",
    ),
    path("runs/export/mlruns/", views.my_mlruns, name="runs-export-mlruns"),
    path(
        "api/v1/jobs/<int:pk>/metrics/tensorboard/",
        streaming_view(views.JobTensorBoardView.as_view()),
        name="api-job-metrics-tensorboard",
    ),
    path(
        "api/v1/compare/csv/",
        streaming_view(views.CompareCsvView.as_view()),
        name="api-compare-csv",
    ),
    path(
        "api/v1/compare/tensorboard/",
        streaming_view(views.CompareTensorBoardView.as_view()),
        name="api-compare-tensorboard",
    ),
    path(
        "api/v1/runs/mlruns/",
        streaming_view(views.MlrunsView.as_view()),
        name="api-runs-mlruns",
    ),
]
