"""Session jobs (a notebook, TensorBoard) open through a link that the proxy app owns.

jobs/ does not import proxy/: the proxy registers its links here when it starts
(``proxy.apps.ProxyConfig.ready``), and the workers ask through ``links()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from jobs.models import Job


class SessionLinks(Protocol):
    def prepare(self, job: Job) -> tuple[str, str]:
        """Before submitting: the one-time secret the job registers with, and where."""
        ...

    def restart_for(self, job: Job) -> bool:
        """The job was requeued or moved: its link waits for the new run to register."""
        ...

    def waiting(self, jobs: Sequence[Job]) -> list[Job]:
        """Those of ``jobs`` whose app has not registered yet."""
        ...

    def found(self, job: Job, host: str, port: int, secret: str) -> bool:
        """The app was found (in its connection file) listening at host:port."""
        ...

    def payload(self, job: Job) -> dict:
        """What pages and the API show of the job's link: {"session_state",
        "session_open_url"} (both None for a job without one)."""
        ...


_links: SessionLinks | None = None


def register(session_links: SessionLinks) -> None:
    global _links
    _links = session_links


def links() -> SessionLinks:
    if _links is None:
        raise ImproperlyConfigured("session jobs need the proxy app in INSTALLED_APPS")
    return _links
