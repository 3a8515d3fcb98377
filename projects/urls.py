from django.urls import path

from projects import views

urlpatterns = [
    path("projects/", views.project_list, name="projects"),
    path("projects/<int:pk>/", views.project_detail, name="project-detail"),
]
