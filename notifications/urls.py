from django.urls import path

from notifications import views

urlpatterns = [
    path("notifications/", views.notification_list, name="notification-list"),
    path("notifications/read/", views.notification_read, name="notification-read"),
    path(
        "notifications/unsubscribe/<str:token>/",
        views.unsubscribe,
        name="notification-unsubscribe",
    ),
    path("account/notifications/", views.notification_settings, name="notification-settings"),
    path("account/notifications/webhook/", views.webhook_settings, name="notification-webhook"),
]
