from django.urls import path

from proxy import api

urlpatterns = [
    path("jobs/<int:job_id>/shares/", api.SharesView.as_view(), name="api-session-shares"),
    path(
        "jobs/<int:job_id>/shares/<int:share_id>/",
        api.ShareView.as_view(),
        name="api-session-share",
    ),
]
