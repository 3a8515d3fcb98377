from django.urls import path

from files import job_views, transfer_views, uploads, views

urlpatterns = [
    path("jobs/<int:pk>/files/", job_views.job_files, name="job-files"),
    path("jobs/<int:pk>/files/download/", job_views.job_file_download, name="job-file-download"),
    path("transfers/", transfer_views.transfer_list, name="transfers"),
    path("transfers/<int:pk>/", transfer_views.transfer_detail, name="transfer-detail"),
    path("transfers/<int:pk>/status/", transfer_views.transfer_status, name="transfer-status"),
    path("transfers/<int:pk>/cancel/", transfer_views.transfer_cancel, name="transfer-cancel"),
    path("remotes/", transfer_views.remotes, name="remotes"),
    path("remotes/<int:pk>/delete/", transfer_views.remote_delete, name="remote-delete"),
    path("files/", views.index, name="files"),
    path("files/<str:cluster>/<str:root>/", views.browse, name="files-browse"),
    path("files/<str:cluster>/<str:root>/mkdir/", views.make_folder, name="files-mkdir"),
    path("files/<str:cluster>/<str:root>/rename/", views.rename, name="files-rename"),
    path("files/<str:cluster>/<str:root>/delete/", views.delete, name="files-delete"),
    path("files/<str:cluster>/<str:root>/view/", views.view, name="files-view"),
    path("files/<str:cluster>/<str:root>/raw/", views.raw_image, name="files-raw"),
    path("files/<str:cluster>/<str:root>/download/", views.download, name="files-download"),
    path("files/<str:cluster>/<str:root>/zip/", views.download_zip, name="files-zip"),
    path("files/<str:cluster>/<str:root>/uploads/", uploads.collection, name="files-uploads"),
    path(
        "files/<str:cluster>/<str:root>/transfer/",
        transfer_views.transfer_new,
        name="transfer-new",
    ),
    path(
        "files/<str:cluster>/<str:root>/uploads/<str:upload_id>/",
        uploads.item,
        name="files-upload",
    ),
]
