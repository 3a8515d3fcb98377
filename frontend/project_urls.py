from django.urls import path

from frontend import projects as views

urlpatterns = [
    path("projects/", views.project_list, name="projects"),
    path("projects/<int:pk>/", views.project_detail, name="project-detail"),
    path("projects/<int:pk>/defaults/", views.project_defaults, name="project-defaults"),
    path("links/", views.link_list, name="read-links"),
    path("links/new/", views.link_new, name="read-link-new"),
    path("links/<int:pk>/revoke/", views.link_revoke, name="read-link-revoke"),
    path("links/<str:token>/", views.link_open, name="read-link"),
]
