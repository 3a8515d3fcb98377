"""The list, the settings page and the unsubscribe link (which needs no sign-in)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from identity import audit
from notifications import mail, webhook
from notifications.events import NOT_CHOSEN, Channel, Event
from notifications.models import Notification, Preference, Webhook


@login_required
def notification_list(request):
    listed = Notification.objects.filter(recipient=request.user).listed()
    page = Paginator(listed.select_related("job", "experiment"), 50).get_page(
        request.GET.get("page")
    )
    return render(request, "notifications/list.html", {"page": page})


@login_required
@require_POST
def notification_read(request):
    """Mark the person's notifications read (all, or the one ``id`` names)."""
    mine = Notification.objects.filter(recipient=request.user, read=False)
    if request.POST.get("id", "").isdigit():
        mine = mine.filter(pk=int(request.POST["id"]))
    mine.update(read=True)
    return redirect("notification-list")


def chosen_events() -> list[tuple[str, str]]:
    return [(event, label) for event, label in Event.choices if event not in NOT_CHOSEN]


@login_required
def notification_settings(request):
    if request.method == "POST":
        for event, _label in chosen_events():
            Preference.set(
                request.user,
                event,
                portal=f"{event}:{Channel.PORTAL}" in request.POST,
                email=f"{event}:{Channel.EMAIL}" in request.POST,
                webhook=f"{event}:{Channel.WEBHOOK}" in request.POST,
            )
        messages.success(request, "Notification settings saved.")
        return redirect("notification-settings")
    return _settings_page(request)


def _settings_page(request, *, secret: str = "", url_error: str = "", status: int = 200):
    choices = Preference.choices_for(request.user)
    rows = [
        {
            "event": event,
            "label": label,
            "portal": choices[event][Channel.PORTAL],
            "email": choices[event][Channel.EMAIL],
            "webhook": choices[event][Channel.WEBHOOK],
        }
        for event, label in chosen_events()
    ]
    context = {
        "rows": rows,
        "hook": Webhook.objects.filter(user=request.user).first(),
        "secret": secret,
        "url_error": url_error,
        "signature_header": webhook.SIGNATURE_HEADER,
        "timestamp_header": webhook.TIMESTAMP_HEADER,
    }
    return render(request, "notifications/settings.html", context, status=status)


@login_required
@require_POST
def webhook_settings(request):
    """Set (or turn back on) the person's webhook URL, make a new secret, or remove it.
    The secret is shown on this response only."""
    hook = Webhook.objects.filter(user=request.user).first()
    action = request.POST.get("action", "save")
    before = hook.url if hook is not None else ""
    if action == "delete":
        if hook is not None:
            hook.delete()
            _audit_change(request.user, before, "")
        messages.success(request, "Webhook removed.")
        return redirect("notification-settings")
    if action == "rotate" and hook is not None:
        return _settings_page(request, secret=hook.rotate_secret())
    url = request.POST.get("url", "").strip()
    try:
        webhook.resolve(url)
    except webhook.Refused as exc:
        return _settings_page(request, url_error=str(exc), status=400)
    hook, secret = Webhook.configure(request.user, url)
    if hook.url != before:
        _audit_change(request.user, before, hook.url)
    if secret:
        return _settings_page(request, secret=secret)
    messages.success(request, "Webhook saved and turned on.")
    return redirect("notification-settings")


def _audit_change(user, before: str, after: str) -> None:
    """An audit row for a webhook's new, changed or removed URL (where notifications about
    the person's jobs go)."""
    audit.record(
        audit.Action.WEBHOOK_CHANGE,
        audit.Outcome.OK,
        user=user,
        target=f"webhook of {user.get_username()}",
        message=f"{before or '(none)'} -> {after or '(removed)'}",
    )


# No sign-in, no CSRF token: the signed token is the authority, for one person and one
# event, and all it can do is turn that event's email off (RFC 8058 one-click POSTs come
# from mail clients, which have no CSRF token).
@csrf_exempt
def unsubscribe(request, token: str):
    try:
        user_id, event = mail.read_unsubscribe_token(token)
    except signing.BadSignature:
        raise Http404("This unsubscribe link is not valid.") from None
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        raise Http404("This unsubscribe link is not valid.")
    done = request.method == "POST"
    if done:
        Preference.set(user, event, email=False)
    context = {"label": Event(event).label, "done": done, "token": token}
    return render(request, "notifications/unsubscribe.html", context)
