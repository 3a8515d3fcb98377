"""A person's listings of jobs (the dashboard's page of rows, a page of GET /api/v1/jobs/)
kept in the cache until a job they may see changes, for at most
PORTAL_LISTING_CACHE_SECONDS (10 s; 0: never cached).

Profiled at a centre's scale (#43), a dashboard or jobs-API request spent most of its time
building the same page again: the ORM compiling and PostgreSQL planning a five-way join,
twenty model instances, a row each (or DRF's 59 fields a row). A person who reloads, or a
client that polls, asks for the same page again and again while nothing in it changed.

**What a listing depends on** is named by its *scope*: the person, what they may see (their
projects and roles, read fresh on every request: a membership granted or revoked shows at
once), and a version token for each of them: the person's own jobs, each of their
projects' jobs, and everything else a row names (images, clusters, partitions, apps,
projects, people's names). A change sets a new random token when it commits (the
receivers below: jobs' own signal, which every change of what a job shows sends,
its tags, notes and parameters included; a job saved or deleted; a catalog entry, a
project or a person saved); the listing is then built again at its next request.
Random tokens, never counters: a token evicted or lost with Redis comes back as a new one,
never as a value an old entry was stored under.

**Bounded staleness**: an entry lives that long at most whatever happens, so a change whose
token was not set (a process killed between its commit and the receiver, Redis down) and
the times a row computes from the clock (a running job's elapsed time, which pages also
tick themselves) are at most that old. So is a job charged to another project, in the
listings of the project it left.

**Not cached**: staff (they see every job: any change anywhere would end the entry), a
person reading through read links, and any request when the cache does not answer (the
listing is built as before; nothing fails).

Entries are per person (their id is in the key) and hold only what that person's own
request built.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from projects import access

log = logging.getLogger(__name__)

T = TypeVar("T")


EVERYTHING = "listing:v:all"  # images, clusters, partitions, apps, projects, names


def _user(user_id: int) -> str:
    return f"listing:v:user:{user_id}"


def _project(project_id: int) -> str:
    return f"listing:v:project:{project_id}"


def _token() -> str:
    return secrets.token_hex(8)


def scope(user: Any) -> str | None:
    """What the person's listings show depends on, as one string (None: not cached)."""
    if not getattr(user, "is_authenticated", False) or access.sees_every_job(user):
        return None
    if access.linked(user)[0]:
        return None
    roles = sorted(access.roles(user).items())
    keys = [EVERYTHING, _user(user.pk)] + [_project(pid) for pid, _ in roles]
    try:
        tokens = cache.get_many(keys)
        missing = {key: _token() for key in keys if key not in tokens}
        if missing:
            cache.set_many(missing, timeout=None)
            tokens.update(missing)
    except Exception:  # noqa: BLE001 - no cache: built as before
        log.warning("listing cache unavailable", exc_info=True)
        return None
    return f"{user.pk}|{roles}|" + ",".join(str(tokens[key]) for key in keys)


def cached(user: Any, what: str, build: Callable[[], T]) -> T:
    """``build()``'s value for this person and ``what`` (the page asked: its path and
    parameters), from the cache while nothing it depends on changed. ``build`` must return
    what the cache stores (JSON: dicts, lists, strings, numbers)."""
    seconds = settings.PORTAL_LISTING_CACHE_SECONDS
    within = scope(user) if seconds else None
    if within is None:
        return build()
    key = "listing:e:" + hashlib.sha256(f"{within}|{what}".encode()).hexdigest()
    try:
        hit = cache.get(key)
    except Exception:  # noqa: BLE001
        hit = None
    if hit is not None:
        return hit
    value = build()
    try:
        cache.set(key, value, seconds)
    except Exception:  # noqa: BLE001
        log.warning("listing cache unavailable", exc_info=True)
    return value


def changed(*, users: Iterable[int | None] = (), projects: Iterable[int | None] = ()) -> None:
    """New tokens for these people's and projects' listings."""
    keys = [_user(u) for u in users if u is not None]
    keys += [_project(p) for p in projects if p is not None]
    if keys:
        _renew(keys)


def changed_everywhere() -> None:
    """Something every listing may name changed (an image's name, a person's)."""
    _renew([EVERYTHING])


def _renew(keys: list[str]) -> None:
    """New tokens once the transaction commits (at once outside one). A listing reads its
    tokens before its rows: one built before the commit read the old rows under the old
    tokens, which the commit then ends; one that reads the tokens after it reads the new
    rows. A change rolled back renews nothing."""
    transaction.on_commit(lambda: _set_new(keys))


def _set_new(keys: list[str]) -> None:
    try:
        cache.set_many({key: _token() for key in keys}, timeout=None)
    except Exception:  # noqa: BLE001 - entries end within their seconds anyway
        log.warning("listing cache unavailable: %s not renewed", keys, exc_info=True)


# -- receivers (connected in JobsConfig.ready()) ------------------------------------------


def on_job_changed(sender, job, **kwargs) -> None:
    """jobs.signals.job_updated (sent on commit), and a Job saved or deleted (its tokens
    renewed on commit)."""
    changed(users=[job.owner_id], projects=[job.project_id])


def on_job_saved_or_deleted(sender, instance, **kwargs) -> None:
    on_job_changed(sender, instance)


def on_named_thing_changed(sender, instance=None, update_fields=None, **kwargs) -> None:
    """A catalog entry, a project or a person saved or deleted (a sign-in's last_login
    alone changes nothing a listing shows)."""
    if update_fields is not None and set(update_fields) <= {"last_login"}:
        return
    changed_everywhere()
