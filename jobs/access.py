"""Who may see and act on a job, written once: its owner, or staff (who see every job).

Pages, the API, websockets and session links all ask through these two functions (or
``Job.objects.for_user``, which is built on them)."""

from __future__ import annotations

from typing import Any


def sees_every_job(user: Any) -> bool:
    return bool(user.is_staff)


def may_see(user: Any, owner_id: int | None) -> bool:
    return sees_every_job(user) or (owner_id is not None and owner_id == user.pk)
