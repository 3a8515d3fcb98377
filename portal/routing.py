"""Websocket routes of every app, collected in one list for portal.asgi."""

websocket_urlpatterns: list = []
