"""Beat: refresh tokens re-confirm people before their provider confirmation runs out."""

from __future__ import annotations

import logging

import requests
from celery import shared_task
from django.conf import settings

from common import crypto
from identity import accounts, confirmation, provider, signin
from identity.models import Identity

log = logging.getLogger(__name__)


@shared_task(name="portal.identity.tasks.reconfirm_identities", ignore_result=True)
def reconfirm_identities() -> dict:
    """Every identity with a refresh token whose confirmation is half its age: the provider
    is asked again (signin.reconfirm applies its answer). A refused refresh token is
    dropped (the person stays unconfirmed until they sign in); a provider that does not
    answer leaves everything as it was, for the next run."""
    counts = {"confirmed": 0, "refused": 0, "failed": 0}
    if not provider.enabled() or not settings.PORTAL_OIDC_REFRESH_CONFIRMS:
        return counts
    for identity in confirmation.due_for_refresh()[:500]:
        try:
            claims, rotated = provider.refresh_userinfo(
                crypto.decrypt(identity.refresh_token_encrypted)
            )
        except provider.RefreshRefused as exc:
            log.info("%s not re-confirmed: %s", identity, exc)
            Identity.objects.filter(pk=identity.pk).update(refresh_token_encrypted="")
            counts["refused"] += 1
            continue
        except (provider.ProviderError, requests.RequestException, ValueError) as exc:
            log.warning("%s: the provider could not be asked: %s", identity, exc)
            counts["failed"] += 1
            continue
        if signin.reconfirm(identity, claims):
            if rotated:
                Identity.objects.filter(pk=identity.pk).update(
                    refresh_token_encrypted=crypto.encrypt(rotated)
                )
            counts["confirmed"] += 1
        else:
            counts["refused"] += 1
    if any(counts.values()):
        log.info("re-confirmation at %s: %s", settings.PORTAL_OIDC_ISSUER, counts)
    return counts


@shared_task(name="portal.identity.tasks.check_accounts", ignore_result=True)
def check_accounts() -> dict:
    """Beat: the provider's account API says who is still enabled (identity/accounts.py)."""
    counts = accounts.run()
    if counts.get("withdrawn") or counts.get("unknown"):
        log.info("accounts at %s: %s", settings.PORTAL_OIDC_ISSUER, counts)
    return counts
