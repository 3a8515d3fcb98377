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

from jobs.notifications import mail
from jobs.notifications.events import Channel, Event
from jobs.notifications.models import Notification, Preference


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


@login_required
def notification_settings(request):
    if request.method == "POST":
        for event in Event.values:
            Preference.set(
                request.user,
                event,
                portal=f"{event}:{Channel.PORTAL}" in request.POST,
                email=f"{event}:{Channel.EMAIL}" in request.POST,
            )
        messages.success(request, "Notification settings saved.")
        return redirect("notification-settings")
    choices = Preference.choices_for(request.user)
    rows = [
        {
            "event": event,
            "label": label,
            "portal": choices[event][Channel.PORTAL],
            "email": choices[event][Channel.EMAIL],
        }
        for event, label in Event.choices
    ]
    return render(request, "notifications/settings.html", {"rows": rows})


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
