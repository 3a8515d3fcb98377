"""The real mail server from `make mail` (deploy/mail/up.sh, exim4) for tests.

``mailbox()`` reads what up.sh wrote in its state directory (root only) and skips the test
when the server is absent, or fails it when ``PORTAL_REQUIRE_DEVCLUSTER=1`` (as
deploy/run-tests.sh sets as root, where `make test` has started it). Every message, for any
address, lands in one Maildir shared by every test run: a test sends to an address of its
own (``address()``) and reads only what was sent there.
"""

from __future__ import annotations

import email
import email.policy
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path

import pytest

from tests import polling


def state_dir() -> Path:
    return Path(os.environ.get("PORTAL_MAIL_DIR", "/var/lib/portal-mail"))


class MailServerMissing(Exception):
    pass


@dataclass(frozen=True)
class Mailbox:
    host: str
    port: int
    maildir: Path

    def settings(self) -> dict[str, object]:
        """Django settings that send through this server."""
        return {
            "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "EMAIL_HOST": self.host,
            "EMAIL_PORT": self.port,
            "EMAIL_USE_TLS": False,
            "EMAIL_HOST_USER": "",
            "EMAIL_HOST_PASSWORD": "",
        }

    def messages(self, to: str) -> list[EmailMessage]:
        """Every message delivered to ``to`` so far, oldest first."""
        found = []
        for folder in ("new", "cur"):
            for path in sorted((self.maildir / folder).glob("*"), key=lambda p: p.name):
                try:
                    raw = path.read_bytes()
                except FileNotFoundError:  # moved between new/ and cur/ meanwhile
                    continue
                message = email.message_from_bytes(raw, policy=email.policy.default)
                assert isinstance(message, EmailMessage)
                if to.lower() in str(message.get("To", "")).lower():
                    found.append(message)
        return found

    def wait_for(
        self,
        to: str,
        count: int = 1,
        timeout: float = 30,
        until: Callable[[list[EmailMessage]], bool] | None = None,
    ) -> list[EmailMessage]:
        """At least ``count`` messages to ``to`` within ``timeout`` seconds (or fail)."""
        got: list[EmailMessage] = []

        def arrived() -> bool:
            nonlocal got
            got = self.messages(to)
            return len(got) >= count and (until is None or until(got))

        polling.until(
            arrived,
            timeout,
            lambda: f"{count} message(s) to {to} (got {len(got)})",
            interval=0.3,
        )
        return got


def address(name: str = "person") -> str:
    """An address no other test (or run) uses."""
    return f"{name}-{uuid.uuid4().hex[:10]}@example.org"


def read_mailbox(state: Path | None = None) -> Mailbox:
    state = state or state_dir()
    try:
        env = dict(
            line.split("=", 1)
            for line in (state / "mail.env").read_text().splitlines()
            if "=" in line and not line.startswith("#")
        )
        box = Mailbox(env["EMAIL_HOST"], int(env["EMAIL_PORT"]), Path(env["MAILDIR"]))
    except (OSError, ValueError, KeyError) as exc:
        raise MailServerMissing(f"no mail server in {state} (`make mail` as root): {exc}") from exc
    try:
        socket.create_connection((box.host, box.port), timeout=3).close()
    except OSError as exc:
        raise MailServerMissing(
            f"the mail server {box.host}:{box.port} does not answer: {exc}"
        ) from exc
    return box


def mailbox() -> Mailbox:
    """The server `make mail` started; skips (or fails, when required) without it."""
    try:
        return read_mailbox()
    except MailServerMissing as exc:
        if os.environ.get("PORTAL_REQUIRE_DEVCLUSTER") == "1":
            pytest.fail(f"PORTAL_REQUIRE_DEVCLUSTER=1 but {exc}")
        pytest.skip(str(exc))
