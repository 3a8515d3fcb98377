"""The usage app's periodic task. Its name is the one it had in jobs/tasks.py: beat's
schedule and any message already queued under it still find it."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mass_mail
from django.utils import timezone

from usage import hours


@shared_task(name="jobs.tasks.send_efficiency_digest")
def send_efficiency_digest(days: int = 7) -> int:
    """Periodic (beat, weekly): the GPU efficiency digest (usage.hours.efficiency) by email to
    every active staff member with an address; how many it was sent to."""
    staff = list(
        get_user_model()
        .objects.filter(is_staff=True, is_active=True)
        .exclude(email="")
        .values_list("email", flat=True)
    )
    if not staff:
        return 0
    since = timezone.now() - timedelta(days=days)
    text = hours.digest_text(hours.efficiency(since), days, settings.PORTAL_URL)
    subject = f"GPU efficiency, last {days} days"
    # One message each: staff do not see each other's addresses.
    return send_mass_mail([(subject, text, None, [address]) for address in staff])
