"""The webhook channel: a Slack/Mattermost-compatible JSON body, signed, posted to a URL
the person chose, to an address checked first (SSRF: the portal's workers sit next to
Redis, the database and the clusters).

A receiver verifies a delivery so (any language; Python shown in ``verify``):
1. read ``X-Portal-Timestamp`` (Unix seconds) and refuse it if it is more than 5 minutes
   from the receiver's clock (a replayed old request);
2. compute ``HMAC-SHA256(secret, "<timestamp>." + raw body bytes)`` as lowercase hex;
3. compare it in constant time with ``X-Portal-Signature`` after its ``v1=`` prefix.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from http.client import HTTPConnection, HTTPException
from urllib.parse import urlsplit

from django.conf import settings

URL_MAX = 2000
SIGNATURE_PREFIX = "v1="
TIMESTAMP_HEADER = "X-Portal-Timestamp"
SIGNATURE_HEADER = "X-Portal-Signature"
TOLERANCE_SECONDS = 300
# What is read of a receiver's answer (its status matters; its body only for the log).
RESPONSE_MAX = 4096


class Refused(ValueError):
    """A webhook URL the portal will not post to; the message says why, for the person."""


# --- signing --------------------------------------------------------------------------------


def signature(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return SIGNATURE_PREFIX + digest.hexdigest()


def headers(secret: str, body: bytes, now: float | None = None) -> dict[str, str]:
    timestamp = int(time.time() if now is None else now)
    return {
        "Content-Type": "application/json",
        "User-Agent": "hpc-portal-webhook/1",
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret, timestamp, body),
    }


def verify(
    secret: str,
    timestamp: str,
    signed: str,
    body: bytes,
    now: float | None = None,
    tolerance: int = TOLERANCE_SECONDS,
) -> bool:
    """What a receiver does: a fresh timestamp and the matching signature."""
    if not timestamp.isdigit():
        return False
    current = time.time() if now is None else now
    if abs(current - int(timestamp)) > tolerance:
        return False
    return hmac.compare_digest(signature(secret, int(timestamp), body), signed)


# --- the body -------------------------------------------------------------------------------


def payload(notification) -> bytes:
    """Slack/Mattermost's ``text`` (the sentence and the link) and the same as fields."""
    return json.dumps(_fields(notification), separators=(",", ":")).encode()


# A digest carries at most this many notifications (the rest go in the next one).
DIGEST_MAX = 50


def digest(notifications: list) -> bytes:
    """Several notifications in one post (the person's rate was reached): ``text`` lists
    them one a line, ``notifications`` holds each one's fields, ``event`` is "digest"."""
    each = [_fields(n) for n in notifications]
    lines = [f"{len(each)} notifications:"] + [f"- {fields['text']}" for fields in each]
    body = {"text": "\n".join(lines), "event": "digest", "notifications": each}
    return json.dumps(body, separators=(",", ":")).encode()


def _fields(notification) -> dict:
    url = settings.PORTAL_URL + notification.url
    job = notification.job
    body = {
        "text": f"{notification.text} {url}",
        "event": notification.event,
        "url": url,
        "job_id": notification.job_id,
        "experiment_id": notification.experiment_id,
        "state": job.state if job is not None else None,
        "created_at": notification.created_at.isoformat(),
    }
    if notification.experiment_id is not None:
        body["state"] = notification.experiment.state
    return body


# --- where it may go ------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # as written (the Host header, the TLS server name)
    port: int
    path: str  # path and query
    address: str  # the checked address that is connected to


def address_allowed(address: str, allowed: list[str]) -> bool:
    """A global unicast address, or one in an allowlisted network (loopback, private,
    link-local, multicast, reserved, unspecified ... are refused otherwise)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:  # a scoped IPv6 address ("fe80::1%eth0"), or not an address
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if any(ip in ipaddress.ip_network(network) for network in allowed):
        return True
    return ip.is_global and not ip.is_multicast


def split_url(url: str, *, allow_http: bool) -> tuple[str, str, int, str]:
    """(scheme, host, port, path) of an acceptable URL; Refused otherwise (no lookup)."""
    if len(url) > URL_MAX:
        raise Refused(f"The URL is longer than {URL_MAX} characters.")
    if any(c.isspace() or ord(c) < 32 for c in url):
        raise Refused("The URL contains spaces or control characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise Refused("The URL is not valid.") from None
    schemes = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in schemes:
        raise Refused("The URL must start with " + " or ".join(f"{s}://" for s in schemes) + ".")
    if parts.username is not None or parts.password is not None:
        raise Refused("The URL must not contain a user name or password.")
    host = parts.hostname
    if not host:
        raise Refused("The URL has no host.")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, host, port or (443 if parts.scheme == "https" else 80), path


def resolve(url: str, timeout: float | None = None) -> Target:
    """The URL checked and its host resolved once, within ``timeout`` seconds (default
    PORTAL_WEBHOOK_CONNECT_TIMEOUT): every address it resolves to must be allowed (a name
    that also points inside is refused), and the first is the one used."""
    scheme, host, port, path = split_url(url, allow_http=settings.PORTAL_WEBHOOK_ALLOW_HTTP)
    limit = settings.PORTAL_WEBHOOK_CONNECT_TIMEOUT if timeout is None else timeout
    infos = _lookup(host, port, max(0.01, limit))
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise Refused(f"The host {host} cannot be resolved.")
    allowed = list(settings.PORTAL_WEBHOOK_ALLOWED_NETWORKS)
    for address in addresses:
        if not address_allowed(address, allowed):
            raise Refused(f"The host {host} resolves to {address}, which the portal may not reach.")
    return Target(scheme, host, port, path, addresses[0])


def _lookup(host: str, port: int, timeout: float) -> list:
    """getaddrinfo within ``timeout`` seconds: it runs in a thread of its own (the C
    resolver has no timeout of ours; a slow name server must not stretch the attempt), which
    is left to finish by itself when the time is up."""
    found: dict = {}

    def lookup() -> None:
        try:
            found["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            found["error"] = exc

    thread = threading.Thread(target=lookup, name=f"webhook-dns-{host[:40]}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise Refused(f"The host {host} was not resolved within {timeout:.1f} s.")
    if "infos" not in found:
        raise Refused(f"The host {host} cannot be resolved.")
    return found["infos"]


# --- posting --------------------------------------------------------------------------------


class _PinnedConnection(HTTPConnection):
    """HTTP(S) to ``address`` (already checked), with ``host`` as the Host header and the
    TLS server name (certificate checked against it): no second DNS lookup."""

    def __init__(self, target: Target, timeout: float, connect_timeout: float):
        super().__init__(target.host, target.port, timeout=timeout)
        self.target = target
        self.connect_timeout = min(connect_timeout, timeout)

    def connect(self) -> None:
        sock = socket.create_connection(
            (self.target.address, self.target.port), self.connect_timeout
        )
        sock.settimeout(self.timeout)
        if self.target.scheme == "https":
            context = ssl.create_default_context()
            sock = context.wrap_socket(sock, server_hostname=self.target.host)
        self.sock = sock


@dataclass(frozen=True)
class Outcome:
    status: int | None  # None: no answer (network error, timeout, refused URL)
    error: str = ""
    slow: bool = False  # answered, but after PORTAL_WEBHOOK_SLOW_SECONDS

    @property
    def delivered(self) -> bool:
        """The receiver took it (a 2xx), however long it took."""
        return self.status is not None and 200 <= self.status < 300

    @property
    def ok(self) -> bool:
        """Delivered in time: a slow 2xx counts as a failed attempt (towards turning the
        webhook off), though it is not posted again."""
        return self.delivered and not self.slow

    @property
    def retryable(self) -> bool:
        """Worth trying again: no answer, a server error or 429 (a redirect or another 4xx
        will answer the same; it still counts as a failure)."""
        return self.status is None or self.status >= 500 or self.status == 429


def post(url: str, body: bytes, secret: str, timeout: float | None = None) -> Outcome:
    """One attempt: check the URL (its name resolved within the attempt's time), post the
    signed body, read a few KB of the answer. No redirect is followed; connecting has
    PORTAL_WEBHOOK_CONNECT_TIMEOUT and the whole attempt is cut at ``timeout`` seconds
    (PORTAL_WEBHOOK_TIMEOUT); an answer after PORTAL_WEBHOOK_SLOW_SECONDS is ``slow``."""
    limit = settings.PORTAL_WEBHOOK_TIMEOUT if timeout is None else timeout
    connect = settings.PORTAL_WEBHOOK_CONNECT_TIMEOUT
    started = time.monotonic()
    try:
        target = resolve(url, timeout=min(connect, limit))
    except Refused as exc:
        return Outcome(None, str(exc))
    left = max(0.01, limit - (time.monotonic() - started))
    connection = _PinnedConnection(target, left, connect)
    # A receiver that answers one byte at a time stays within the socket timeout; this
    # cuts the attempt as a whole.
    watchdog = threading.Timer(left, _cut, args=(connection,))
    watchdog.start()
    try:
        sent = dict(headers(secret, body))
        connection.request("POST", target.path, body=body, headers=sent)
        response = connection.getresponse()
        response.read(RESPONSE_MAX)
        took = time.monotonic() - started
        if took > settings.PORTAL_WEBHOOK_SLOW_SECONDS:
            return Outcome(
                response.status,
                f"answered {response.status} after {took:.1f} s "
                f"(more than {settings.PORTAL_WEBHOOK_SLOW_SECONDS:g} s)",
                slow=True,
            )
        return Outcome(response.status, "" if 200 <= response.status < 300 else response.reason)
    except (OSError, HTTPException, ValueError) as exc:
        return Outcome(None, f"{type(exc).__name__}: {exc}"[:200])
    finally:
        watchdog.cancel()
        connection.close()


def _cut(connection: HTTPConnection) -> None:
    sock = connection.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def backoff_seconds(retries: int) -> float:
    """The wait before retry ``retries`` + 1: 10 s, 20 s, 40 s ... at most 10 minutes."""
    return float(min(10 * 2**retries, 600))
