"""Browser sessions follow the provider: a signed-in session whose person's confirmation
is no longer current (confirmation.py) is ended at its next request, which then goes on
as anonymous (pages send the person to the sign-in page, the API answers 401/403); a
websocket opened with such a session connects as anonymous (and is refused)."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from django.contrib import auth, messages
from django.contrib.auth.models import AnonymousUser

from common.api_errors import DATABASE_DOWN
from identity import confirmation, provider


class ConfirmationMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        if provider.enabled():
            try:
                self.check(request)
            except DATABASE_DOWN:
                pass  # the view meets it again and answers 503 (portal/middleware.py)
        return self.get_response(request)

    @staticmethod
    def check(request) -> None:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            message = confirmation.stale(user)
            if message is not None:
                auth.logout(request)  # a new, empty session: this request goes on anonymous
                messages.warning(request, message)


class ConfirmedWebsocketMiddleware(BaseMiddleware):
    """Inside Channels' AuthMiddlewareStack: a stale person's socket is anonymous."""

    async def __call__(self, scope, receive, send):
        user = scope.get("user")
        if user is not None and user.is_authenticated:
            if await database_sync_to_async(confirmation.stale)(user) is not None:
                scope = dict(scope, user=AnonymousUser())
        return await super().__call__(scope, receive, send)
