"""Reusable SSH connections per cluster account per worker process.

The portal's own bookkeeping (the sync, metrics tails: no ``acting.purpose``) shares one
connection per account. An action someone asked for (``identity.audit.action``: a submit, a
log read, a download) gets a connection of its own, keyed by who asked and the kind of
action (``acting.action``, not its target: twenty folders browsed are one login, not
twenty), so that in certificate mode its certificate's key id, which sshd logs at login,
names that person and the action that opened it (each request's own target is in the
audit log, with that key id); the same kind of action again reuses it, and at most
ACTIONS_PER_ACCOUNT of them are kept per account (the oldest is closed).

A connection is opened on first use and kept (with keep-alives); a dropped
transport is replaced once, transparently, for commands that are safe to repeat.
A change to the cluster's address, pinned key, the account's key, the cluster's SSH
authentication mode or (certificate mode) the signing CA opens a new connection, and so
does a certificate's expiry. After fork (Celery prefork) the child starts with an empty
pool. Each operation records the key id that carries it in ``acting.key_id``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings

from clusters import acting, certs, signer, ssh
from clusters import share as cluster_share
from common import prometheus as metrics

log = logging.getLogger(__name__)
T = TypeVar("T")

ACTIONS_PER_ACCOUNT = 4

_lock = threading.Lock()
# (account id, slot) -> (configuration key, connection); slot "" is the bookkeeping's.
_connections: dict[tuple[int, str], tuple[str, ssh.Connection]] = {}


def _slot() -> str:
    """Whose action the caller runs ("" for the portal's own bookkeeping)."""
    if not acting.purpose.get():
        return ""
    return f"{acting.requester.get()}\0{acting.action.get() or acting.purpose.get()}"


def _evict_actions(account_pk: int) -> None:
    """Keep at most ACTIONS_PER_ACCOUNT action connections of one account (under _lock)."""
    for slot in [k for k in _connections if k[0] == account_pk and k[1]]:
        conn = _connections[slot][1]
        if conn.expired or not conn.is_open:  # an action's connection is not kept longer
            _connections.pop(slot)[1].close()
    # The oldest first, never one another thread is using now (its work would be cut
    # mid-way: it goes at a later eviction).
    actions = [
        k for k in _connections if k[0] == account_pk and k[1] and not _connections[k][1].in_use
    ]
    for slot in actions[: max(0, len(actions) - ACTIONS_PER_ACCOUNT)]:
        _connections.pop(slot)[1].close()


def _counted() -> None:
    """The metrics' count of this process's open connections (after each change)."""
    metrics.SSH_POOL_CONNECTIONS.set(len(_connections))


def _reset_after_fork() -> None:
    global _lock
    _lock = threading.Lock()
    _connections.clear()  # the parent's sockets belong to the parent


os.register_at_fork(after_in_child=_reset_after_fork)


def config_key(account) -> str:
    """What a login depends on: when it changes, a new connection (or OpenSSH master,
    clusters/bulk.py) is made."""
    cluster = account.cluster
    material = "\0".join(
        [
            cluster.ssh_host,
            str(cluster.ssh_port),
            cluster.host_key.strip(),
            account.username,
            # How the cluster user is vouched for: a change (typed, disabled) is a new login,
            # which the signer checks again (a connection kept for a kind of action would
            # otherwise carry on with the certificate of before).
            account.mapped_by,
            account.mapping_seal,
            str(account.disabled_at),
            cluster.ssh_auth,
            # A rotation (a new first CA) opens new connections with the new CA's certificates
            # (asking a signer, which holds the CA: its certificates are minutes long anyway).
            _certificate_source() if cluster.uses_certificates else account.private_key_encrypted,
        ]
    )
    return hashlib.sha256(material.encode()).hexdigest()


def _certificate_source() -> str:
    if settings.PORTAL_SSH_SIGNER_SOCKET:
        return "signer:" + settings.PORTAL_SSH_SIGNER_SOCKET
    return certs.ca_fingerprint()


def get(account) -> ssh.Connection:
    """An open connection for ``account``, reused when its configuration is unchanged. In a
    web request, the person's place among those waiting on clusters is taken first
    (clusters/share.py: Busy when they have none left)."""
    cluster_share.claim()
    try:
        key = config_key(account)
    except certs.CAMissing as exc:
        raise ssh.AuthenticationFailed(str(exc)) from None
    if stale := signer.stale_refusal(account, acting.requester.get()):
        # A connection open for the person's own action may hold a certificate that is
        # still valid: the person's word is not (their account's bookkeeping goes on).
        discard(account)
        raise ssh.AuthenticationFailed(stale)
    slot = (account.pk, _slot())
    with _lock:
        conn = _usable(slot, key)
    if conn is None:
        # The login (a certificate from the signer, the handshake) happens outside the
        # lock: one slow or hanging login holds no other account's connection.
        fresh = ssh.connect_account(account)
        replaced: tuple[str, ssh.Connection] | None = None
        with _lock:
            conn = _usable(slot, key)  # another thread's login finished first: use it
            if conn is None:
                conn, replaced = fresh, _connections.pop(slot, None)
                _connections[slot] = (key, conn)  # (newest last: eviction takes the oldest)
                _evict_actions(account.pk)
                _counted()
        if conn is not fresh:
            fresh.close()
        if replaced is not None:
            replaced[1].close()  # (closed, expired, or made for another configuration)
    acting.key_id.set(conn.key_id)
    return conn


def _usable(slot: tuple[int, str], key: str) -> ssh.Connection | None:
    """The pooled connection of ``slot`` when it is still good for ``key`` (under _lock)."""
    entry = _connections.get(slot)
    if entry and entry[0] == key and entry[1].is_open and not entry[1].expired:
        return entry[1]
    return None


def discard(account) -> None:
    """Close the caller's connection for ``account`` (its action's, or the bookkeeping's)."""
    with _lock:
        entry = _connections.pop((account.pk, _slot()), None)
        _counted()
    if entry:
        entry[1].close()


def close_all() -> None:
    with _lock:
        entries = list(_connections.values())
        _connections.clear()
        _counted()
    for _, conn in entries:
        conn.close()


def with_connection(account, operation: Callable[..., T], *, retry: bool = True) -> T:
    """Run ``operation`` on the pooled connection; on a dropped connection, once more on a new
    one (``retry``). (``operation`` is called with the connection alone: typed loosely for the
    callers' lambdas that bind loop values as defaults.)

    Only for operations that are safe to repeat (queries, scancel, the
    idempotent submit script). A command that ran out of time (ssh.CommandTimedOut) is not
    run again: it would hold the worker as long once more.
    """
    conn = get(account)
    try:
        return operation(conn)
    except ssh.CommandTimedOut:
        raise
    except ssh.ClusterUnreachable as exc:
        if not retry:
            raise
        log.info("SSH connection to %s failed (%s); reconnecting once", conn, exc)
        discard(account)
        return operation(get(account))  # (get() records the new connection's key id)
