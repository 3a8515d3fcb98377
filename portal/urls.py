from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from frontend.forms import SignInForm
from identity.views import SignInView
from ops import views as ops_views
from portal.docs import docs
from portal.health import healthz, readyz

admin.site.site_header = "HPC portal administration"
admin.site.site_title = "HPC portal admin"
admin.site.index_title = "Catalog, clusters and jobs"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", ops_views.metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path(
        "accounts/login/",
        SignInView.as_view(authentication_form=SignInForm),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("oidc/", include("identity.urls")),
    path("sessions/", include("proxy.urls")),
    path("", include("tracking.urls")),  # MLflow's client, with a job's token; imports
    path("", include("tracking.export_urls")),  # TensorBoard, CSV and mlruns downloads
    path("api/v1/", include("proxy.api_urls")),
    path("api/v1/", include("portal.api_urls")),
    path("api/v1/", include("files.api_urls")),
    path("docs/", docs, name="docs"),
    re_path(r"^docs/(?P<path>.+)$", docs, name="docs-page"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include("notifications.urls")),
    path("", include("frontend.project_urls")),
    path("", include("files.urls")),
    path("", include("frontend.urls")),
]
