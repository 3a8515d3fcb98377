"""The SSH certificate signer: the one process that reads the CA key (`manage.py ssh_signer`).

Web and worker processes with ``PORTAL_SSH_SIGNER_SOCKET`` set never open the CA key: for
each connection they make an Ed25519 key pair in memory, send the public key with the
account and the action over a Unix socket, and get a certificate back. The signer decides
on its own, from the database, whether it may sign: the account's cluster user must be
vouched for (``signing_refusal``), whatever the asking process says; the principal is
the account's cluster user as stored, never a name from the request. A compromised web
process can therefore ask only for accounts the portal already signs for, and cannot take
the CA key away.

Protocol: one request per connection, one JSON object on one line of at most
REQUEST_MAX bytes: ``{"account": <id>, "public_key": "ssh-ed25519 AAAA...", "purpose":
"submit job 42", "requester": "alice"}``; the answer is one line, ``{"certificate":
"ssh-ed25519-cert-v01@openssh.com AAAA..."}`` or ``{"error": "..."}``. Only peers whose
uid is the signer's own or listed in PORTAL_SSH_SIGNER_CLIENTS (SO_PEERCRED) are served.
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import socket
import socketserver
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TypeGuard

import paramiko
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from django.conf import settings
from django.db import close_old_connections

from clusters import certs, deadline
from common import context

log = logging.getLogger(__name__)

REQUEST_MAX = 8 * 1024
ANSWER_MAX = 16 * 1024
TIMEOUT = 10.0  # seconds for one request, each way
TEXT_MAX = 200  # purpose and requester: they go into the key id, which is bounded anyway


class Refused(Exception):
    """The signer (or the rule it applies) said no; the message is its reason."""


class Unreachable(Exception):
    """The signer could not be asked (not running, restarting): try again later."""


def signing_refusal(account, requester: str = "") -> str:
    """Why no certificate may be signed for ``account`` now ("" when one may): asked by a
    process before it signs (ssh.account_key) and by the signer, whatever the asking
    process said. A cluster user must be vouched for (ClusterAccount.unproven_reason),
    and a person acting on their own account must be vouched for by the identity provider
    now (``stale_refusal``)."""
    return account.unproven_reason() or stale_refusal(account, requester) or ""


def stale_refusal(account, requester: str) -> str | None:
    """The message when ``requester`` acts on their own ``account`` while their word from
    the identity provider is not current (identity/confirmation.py), else None.
    The portal's own bookkeeping (no requester: following jobs already running to their
    final state, their tails and notifications) and other people's actions on it (staff
    cancelling, the idle-GPU policy) go on."""
    if not requester or account.user_id is None:
        return None
    message: str | None
    if _vouching is None:  # (fails closed: no process signs without identity's word)
        message = "the portal cannot ask the identity provider's word now (identity not loaded)"
    else:
        message = _vouching(account.user_id)  # (no query with OIDC off)
    return message if message and account.user.get_username() == requester else None


# What the floors above fill in (their AppConfig.ready): identity's word on a person
# (identity/confirmation.py: a message while it is not current), and the answer to a
# request for a person's own key into their running job (jobs/node_access.py).
_vouching: Callable[[int], str | None] | None = None
_personal: Callable[[dict], dict] | None = None


def vouch_with(check: Callable[[int], str | None]) -> None:
    global _vouching
    _vouching = check


def answer_personal_with(answer: Callable[[dict], dict]) -> None:
    global _personal
    _personal = answer


# --- the client side: what account_key calls in a process that does not sign --------------


def issue(account, requester: str, purpose: str) -> paramiko.PKey:
    """A fresh key with a certificate from the signer for ``account`` (see module doc).
    Refused when the signer says no, Unreachable when it cannot be asked."""
    key = ed25519.Ed25519PrivateKey.generate()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    request = {
        "account": account.pk,
        "public_key": public.decode(),
        "purpose": purpose[:TEXT_MAX],
        "requester": requester[:TEXT_MAX],
        "request_id": context.current(),
    }
    answer = _ask(settings.PORTAL_SSH_SIGNER_SOCKET, request)
    if "certificate" not in answer:
        raise Refused(str(answer.get("error", "the signer refused")))
    try:
        certificate = serialization.load_ssh_public_identity(answer["certificate"].encode())
    except (ValueError, AttributeError, TypeError) as exc:
        raise Refused(f"the signer's answer is no certificate: {exc}") from None
    if not isinstance(certificate, serialization.SSHCertificate) or (
        certificate.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        != public
    ):
        raise Refused("the signer's certificate is not for the key sent")
    return certs.with_certificate(key, certificate)


def certify(account, personal_key, requester: str, purpose: str, *, job) -> str:
    """A certificate line for a person's own key (clusters.models.PersonalKey) into their
    running ``job`` on ``account``: asked of the signer when there is one, else decided
    here by the same rules (``answer``). Refused with the reason, Unreachable when the
    signer cannot be asked."""
    request = {
        "account": account.pk,
        "personal_key": personal_key.pk,
        "job": job.pk,
        "purpose": purpose[:TEXT_MAX],
        "requester": requester[:TEXT_MAX],
        "request_id": context.current(),
    }
    if settings.PORTAL_SSH_SIGNER_SOCKET:
        reply = _ask(settings.PORTAL_SSH_SIGNER_SOCKET, request)
    else:
        reply = answer(request)
    if not isinstance(reply.get("certificate"), str):
        raise Refused(str(reply.get("error", "the signer refused")))
    return reply["certificate"]


def _ask(path: str, request: dict) -> dict:
    limit = deadline.cap(TIMEOUT)  # within the task's deadline too
    if limit <= 0:
        raise Unreachable("no time left to ask the SSH certificate signer")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(limit)
            sock.connect(path)
            sock.sendall(json.dumps(request).encode() + b"\n")
            answer = _read_line(sock, ANSWER_MAX)
    except OSError as exc:
        raise Unreachable(f"the SSH certificate signer ({path}) did not answer: {exc}") from None
    try:
        parsed = json.loads(answer)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise Refused("the SSH certificate signer's answer is not JSON")
    return parsed


def _read_line(sock: socket.socket, limit: int) -> bytes:
    data = bytearray()
    while b"\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            raise OSError(f"more than {limit} bytes without a line end")
    return bytes(data.split(b"\n", 1)[0])


# --- the signer -------------------------------------------------------------------------------


def answer(request: object) -> dict:
    """The signer's answer to one parsed request (pure but for the database read)."""
    from clusters.models import ClusterAccount

    if not isinstance(request, dict):
        return {"error": "the request is not a JSON object"}
    if "personal_key" in request:
        if _personal is None:
            return {"error": "this signer does not certify personal keys"}
        return _personal(request)
    account_id, public_line = request.get("account"), request.get("public_key")
    purpose, requester = request.get("purpose", ""), request.get("requester", "")
    if not isinstance(account_id, int) or isinstance(account_id, bool):
        return {"error": "account must be an account id"}
    if not all(isinstance(v, str) for v in (public_line, purpose, requester)):
        return {"error": "public_key, purpose and requester must be text"}
    try:
        public = serialization.load_ssh_public_key(str(public_line).encode())
    except (ValueError, TypeError, NotImplementedError, UnsupportedAlgorithm, UnicodeError):
        return {"error": "public_key is not an OpenSSH public key"}
    if not isinstance(public, ed25519.Ed25519PublicKey):
        return {"error": "public_key must be an Ed25519 key"}
    account = ClusterAccount.objects.select_related("cluster", "user").filter(pk=account_id).first()
    if account is None:
        return {"error": f"no cluster account {account_id}"}
    return signed(
        account,
        requester,
        lambda: certs.sign(
            public,
            account.username,  # the stored cluster user, never a name from the request
            requester[:TEXT_MAX],
            purpose[:TEXT_MAX],
            cluster=account.cluster.name,
            request_id=context.well_formed(request.get("request_id")),  # (else none)
        ),
    )


def signed(account, requester: str, sign: Callable[[], certs.SSHCertificate]) -> dict:
    """The answer once the request is read: ``sign()``'s certificate if the account's
    cluster takes certificates and the account may be signed for now, else why not."""
    if not account.cluster.uses_certificates:
        return {"error": f"{account.cluster.name} does not use certificates"}
    refusal = signing_refusal(account, requester)
    if refusal:
        return {"error": refusal}
    try:
        certificate = sign()
    except certs.CAMissing as exc:
        return {"error": str(exc)}
    return {"certificate": certificate.public_bytes().decode()}


def is_id(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def allowed_uids() -> set[int]:
    uids = {os.geteuid()}
    for name in settings.PORTAL_SSH_SIGNER_CLIENTS:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            log.warning("PORTAL_SSH_SIGNER_CLIENTS names %s, who is no user here", name)
    return uids


def peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(TIMEOUT)
        server: Server = self.server  # type: ignore[assignment]
        try:
            uid = peer_uid(sock)
            # The request is read (bounded) before any answer, so that the asking side's
            # send never meets a closed socket.
            line = _read_line(sock, REQUEST_MAX)
            if uid not in server.uids:
                log.warning("signer: refused a request from uid %s", uid)
                reply: dict = {"error": f"uid {uid} may not ask this signer"}
            else:
                try:
                    request = json.loads(line)
                except (ValueError, UnicodeDecodeError):
                    request = None
                reply = answer(request)
                log.info(
                    "signer: account %s for %s: %s",
                    request.get("account") if isinstance(request, dict) else "?",
                    uid,
                    "signed" if "certificate" in reply else reply["error"],
                )
            sock.sendall(json.dumps(reply).encode() + b"\n")
        except OSError as exc:
            log.info("signer: a request failed: %s", exc)
        finally:
            close_old_connections()


class Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str):
        self.uids = allowed_uids()
        Path(path).unlink(missing_ok=True)
        old = os.umask(0o117)  # the socket: owner and group (the portal's) only
        try:
            super().__init__(path, _Handler)
        finally:
            os.umask(old)
