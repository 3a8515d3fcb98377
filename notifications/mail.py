"""The email channel: one message for one notification, or a digest of several, through
Django's email backend (SMTP settings from the environment), each with the link to its
page and an unsubscribe link that works without signing in, for that person and event only
(a signed token; RFC 8058 one-click through List-Unsubscribe-Post)."""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.core import signing
from django.core.mail import EmailMessage
from django.urls import reverse

from notifications.events import NOT_CHOSEN, Event, one_line
from notifications.models import Notification

# A token signed for unsubscribing is nothing else (a session, a password reset).
UNSUBSCRIBE_SALT = "notifications.unsubscribe"


def unsubscribe_token(user_id: int, event: str) -> str:
    return signing.dumps([user_id, event], salt=UNSUBSCRIBE_SALT)


def read_unsubscribe_token(token: str) -> tuple[int, str]:
    """(user id, event) the token was made for; BadSignature for anything else."""
    try:
        user_id, event = signing.loads(token, salt=UNSUBSCRIBE_SALT)
    except (ValueError, TypeError):
        raise signing.BadSignature("not an unsubscribe token") from None
    if not isinstance(user_id, int) or event not in Event.values:
        raise signing.BadSignature("not an unsubscribe token")
    return user_id, event


def unsubscribe_url(user_id: int, event: str) -> str:
    path = reverse("notification-unsubscribe", args=[unsubscribe_token(user_id, event)])
    return settings.PORTAL_URL + path


def _item(notification: Notification) -> list[str]:
    lines = [notification.text]
    if notification.detail:
        lines += ["", "The end of its error output:", ""]
        lines += [f"    {line}" for line in notification.detail.splitlines()]
    lines += ["", f"Open it: {settings.PORTAL_URL}{notification.url}"]
    return lines


def build(recipient, notifications: Sequence[Notification]) -> EmailMessage:
    """The email for ``notifications`` (one, or a digest of several) to ``recipient``."""
    events = list(dict.fromkeys(n.event for n in notifications))
    if len(notifications) == 1:
        subject = one_line(notifications[0].text, 120)
        body = _item(notifications[0])
    else:
        subject = f"{len(notifications)} notifications from the HPC portal"
        body = [
            f"{len(notifications)} things happened to your work; each links to its page.",
        ]
        for number, notification in enumerate(notifications, 1):
            body += ["", f"{number}. " + "\n".join(_item(notification))]
    body += [
        "",
        "-- ",
        f"Your notification settings: {settings.PORTAL_URL}{reverse('notification-settings')}",
    ]
    # Events that are not a choice (a webhook turned off) have no link to stop them.
    events = [event for event in events if event not in NOT_CHOSEN]
    for event in events:
        body.append(
            f'Stop emails for "{Event(event).label}" (no sign-in needed): '
            f"{unsubscribe_url(recipient.pk, event)}"
        )
    headers = {"Auto-Submitted": "auto-generated"}
    if len(events) == 1:
        headers["List-Unsubscribe"] = f"<{unsubscribe_url(recipient.pk, events[0])}>"
        headers["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    return EmailMessage(
        subject=subject,
        body="\n".join(body) + "\n",
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[recipient.email],
        headers=headers,
    )
