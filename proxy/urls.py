from django.urls import path

from proxy import views

urlpatterns = [
    path("register/<str:public_id>/", views.register, name="session-register"),
    path("<str:public_id>/open/", views.open_session, name="session-open"),
    path("<str:public_id>/status/", views.session_status, name="session-status"),
    path("<str:public_id>/revoke/", views.revoke, name="session-revoke"),
    path("<str:public_id>/share/", views.share, name="session-share"),
    path(
        "<str:public_id>/shares/<int:share_id>/withdraw/",
        views.unshare,
        name="session-unshare",
    ),
]
