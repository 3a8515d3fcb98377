from django.urls import path

from jobs import views

urlpatterns = [
    path("jobs/<int:pk>/metrics/ingest/", views.metrics_upload, name="metrics-upload"),
]
