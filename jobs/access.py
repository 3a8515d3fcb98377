"""Who may see and act on a job, written once: its owner, or staff (who see every job).

Pages, the API, websockets and session links all ask through these two functions (or
``Job.objects.for_user``, which is built on them).

An API request made with a token (jobs/api/auth.py) carries the token's scopes on the user
as ``api_scopes``: a staff member's token without the admin scope acts as its owner alone."""

from __future__ import annotations

from typing import Any


def sees_every_job(user: Any) -> bool:
    return bool(user.is_staff) and "admin" in getattr(user, "api_scopes", ("admin",))


def may_see(user: Any, owner_id: int | None) -> bool:
    return sees_every_job(user) or (owner_id is not None and owner_id == user.pk)
