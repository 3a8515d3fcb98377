from django.urls import path

from identity import views

urlpatterns = [
    path("login/", views.login, name="oidc-login"),
    path("callback/", views.callback, name="oidc-callback"),
    path("logout/", views.logout, name="oidc-logout"),
    path("link/", views.link, name="oidc-link"),
    path("backchannel-logout/", views.backchannel_logout, name="oidc-backchannel-logout"),
]
