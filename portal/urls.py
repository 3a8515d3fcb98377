from django.contrib import admin
from django.urls import include, path

admin.site.site_header = "HPC portal administration"
admin.site.site_title = "HPC portal admin"
admin.site.index_title = "Catalog, clusters and jobs"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("frontend.urls")),
]
