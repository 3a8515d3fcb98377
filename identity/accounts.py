"""Is the person's account still enabled at the provider? Asked every few seconds.

A refresh token or a back-channel logout tells the portal of some changes at the identity
provider, not all: glewlwyd 2.7 keeps answering a disabled person's refresh token and sends
no logout when an administrator disables them, and many providers behave alike. Where the
provider has an account API, the portal asks it directly (PORTAL_OIDC_ACCOUNT_URL, with
{username} or {subject}; PORTAL_OIDC_ACCOUNT_AUTHORIZATION, the header's value): an
account answered as disabled (``PORTAL_OIDC_ACCOUNT_ENABLED_FIELD`` false) or gone (404)
is withdrawn at once (signin.withdraw: tokens, sessions, cluster accounts, and the
session proxy's openers through identity.signals.withdrawn).

Who is asked, each run (``due``): first the people who can reach an open session now
(apps register them with ``register_urgent``), then the rest of those whose
confirmation is current, the longest unasked first, PORTAL_OIDC_ACCOUNT_BATCH in all.
Every call has a short timeout and a bounded answer; a provider that does not answer
changes nothing (the confirmation's own age still applies).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from urllib.parse import quote

import requests
from django.conf import settings
from django.core.cache import cache
from django.db.models import F
from django.utils import timezone

from identity import signin
from identity.models import Identity

log = logging.getLogger(__name__)

TIMEOUT = (2.0, 3.0)  # connect, read (seconds) for one question
ANSWER_BYTES = 64 * 1024  # an account's JSON is far smaller; more is not read
THREADS = 8
LOCK = "identity:accounts-check"

_urgent: list[Callable[[], Iterable[int]]] = []


def register_urgent(source: Callable[[], Iterable[int]]) -> None:
    """``source()`` names user ids to ask about first at every run (the session proxy:
    everyone who can open a session now)."""
    if source not in _urgent:
        _urgent.append(source)


def enabled() -> bool:
    return bool(settings.PORTAL_OIDC_ISSUER and settings.PORTAL_OIDC_ACCOUNT_URL)


class Unknown(Exception):
    """The provider gave no usable answer (down, slow, an error, an answer not understood)."""


def url_for(identity: Identity) -> str:
    return settings.PORTAL_OIDC_ACCOUNT_URL.format(
        username=quote(identity.provider_username, safe=""),
        subject=quote(identity.subject, safe=""),
    )


def parse(status: int, body: bytes) -> bool:
    """True: the account is enabled; False: disabled or gone (404). Unknown otherwise."""
    if status == 404:
        return False
    if status != 200:
        raise Unknown(f"HTTP {status}")
    try:
        answer = json.loads(body)
    except ValueError as exc:
        raise Unknown("an answer that is not JSON") from exc
    if isinstance(answer, list) and len(answer) == 1:  # a search endpoint's one match
        answer = answer[0]
    if not isinstance(answer, dict):
        raise Unknown("an answer that is not one account")
    value = answer.get(settings.PORTAL_OIDC_ACCOUNT_ENABLED_FIELD)
    if not isinstance(value, bool):
        raise Unknown(f"no boolean {settings.PORTAL_OIDC_ACCOUNT_ENABLED_FIELD!r} in the answer")
    return value


def ask(identity: Identity) -> bool:
    """The provider's word on ``identity``'s account (``parse``), within TIMEOUT."""
    headers = {"Accept": "application/json"}
    if settings.PORTAL_OIDC_ACCOUNT_AUTHORIZATION:
        headers["Authorization"] = settings.PORTAL_OIDC_ACCOUNT_AUTHORIZATION
    started = time.monotonic()
    try:
        with requests.get(
            url_for(identity),
            headers=headers,
            timeout=TIMEOUT,
            stream=True,
            allow_redirects=False,
        ) as answer:
            body = b""
            for chunk in answer.iter_content(8192):
                body += chunk
                if len(body) > ANSWER_BYTES:
                    raise Unknown(f"an answer over {ANSWER_BYTES} bytes")
                if time.monotonic() - started > sum(TIMEOUT):
                    raise Unknown("an answer slower than its deadline")
            return parse(answer.status_code, body)
    except requests.RequestException as exc:
        raise Unknown(str(exc)) from exc


def due(limit: int) -> list[Identity]:
    """Whom to ask this run: the urgent people's identities, then the current ones asked
    longest ago; only identities with the provider's user name when the URL needs it."""
    since = timezone.now() - timedelta(seconds=settings.PORTAL_OIDC_CONFIRM_MAX_AGE)
    current = Identity.objects.filter(
        issuer=settings.PORTAL_OIDC_ISSUER, confirmed_at__gte=since, user__is_active=True
    ).select_related("user")
    if "{username}" in settings.PORTAL_OIDC_ACCOUNT_URL:
        current = current.exclude(provider_username="")
    urgent: set[int] = set()
    for source in _urgent:
        try:
            urgent.update(source())
        except Exception:  # noqa: BLE001 - one source's failure must not stop the check
            log.exception("who to ask first: %s failed", source)
    oldest = (F("account_checked_at").asc(nulls_first=True), "pk")
    first = list(current.filter(user_id__in=urgent).order_by(*oldest)[:limit])
    rest = current.exclude(pk__in=[i.pk for i in first]).order_by(*oldest)[
        : max(limit - len(first), 0)
    ]
    return first + list(rest)


def check(identities: list[Identity]) -> dict[str, int]:
    """Ask about each (THREADS at a time); withdraw those disabled or gone."""
    counts = {"enabled": 0, "withdrawn": 0, "unknown": 0}

    def one(identity: Identity) -> tuple[Identity, bool | None]:
        try:
            return identity, ask(identity)
        except Unknown as exc:
            log.warning("account of %s at the provider: %s", identity, exc)
            return identity, None

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        answers = list(pool.map(one, identities))
    answered = [identity.pk for identity, answer in answers if answer is not None]
    Identity.objects.filter(pk__in=answered).update(account_checked_at=timezone.now())
    for identity, answer in answers:
        if answer is None:
            counts["unknown"] += 1
            continue
        if answer:
            counts["enabled"] += 1
            continue
        # Only if nothing moved since it was read: a sign-in meanwhile is newer news.
        if Identity.objects.filter(pk=identity.pk, confirmed_at=identity.confirmed_at).exists():
            log.info("%s is disabled or gone at the provider: withdrawn", identity.user)
            signin.withdraw(identity.user, reason="disabled at the identity provider")
            counts["withdrawn"] += 1
    return counts


def run() -> dict[str, int]:
    """One run of the check (the beat's, every PORTAL_OIDC_ACCOUNT_SECONDS); skipped while
    another is still running, so a slow provider holds one worker at most."""
    if not enabled():
        return {}
    if not cache.add(LOCK, 1, timeout=120):
        return {"skipped": 1}
    try:
        return check(due(settings.PORTAL_OIDC_ACCOUNT_BATCH))
    finally:
        cache.delete(LOCK)
