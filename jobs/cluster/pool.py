"""One reusable SSH connection per (cluster, cluster account) per worker process.

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

from jobs.cluster import acting, certs, ssh
from portal.identity import confirmation

log = logging.getLogger(__name__)
T = TypeVar("T")

_lock = threading.Lock()
_connections: dict[int, tuple[str, ssh.Connection]] = {}


def _reset_after_fork() -> None:
    global _lock
    _lock = threading.Lock()
    _connections.clear()  # the parent's sockets belong to the parent


os.register_at_fork(after_in_child=_reset_after_fork)


def _config_key(account) -> str:
    cluster = account.cluster
    material = "\0".join(
        [
            cluster.ssh_host,
            str(cluster.ssh_port),
            cluster.host_key.strip(),
            account.username,
            cluster.ssh_auth,
            # A rotation (a new first CA) opens new connections with the new CA's certificates.
            certs.ca_fingerprint() if cluster.uses_certificates else account.private_key_encrypted,
        ]
    )
    return hashlib.sha256(material.encode()).hexdigest()


def get(account) -> ssh.Connection:
    """An open connection for ``account``, reused when its configuration is unchanged."""
    try:
        key = _config_key(account)
    except certs.CAMissing as exc:
        raise ssh.AuthenticationFailed(str(exc)) from None
    if stale := confirmation.stale_user_id(account.user_id):
        discard(account)  # its certificate may still be valid: the person's word is not
        raise ssh.AuthenticationFailed(stale)
    with _lock:
        entry = _connections.get(account.pk)
        if entry and entry[0] == key and entry[1].is_open and not entry[1].expired:
            conn = entry[1]
        else:
            if entry:
                entry[1].close()
            conn = ssh.connect_account(account)
            _connections[account.pk] = (key, conn)
    acting.key_id.set(conn.key_id)
    return conn


def discard(account) -> None:
    with _lock:
        entry = _connections.pop(account.pk, None)
    if entry:
        entry[1].close()


def close_all() -> None:
    with _lock:
        entries = list(_connections.values())
        _connections.clear()
    for _, conn in entries:
        conn.close()


def with_connection(account, operation: Callable[..., T]) -> T:
    """Run ``operation`` on the pooled connection; on a dropped connection, once more on a new one.
    (``operation`` is called with the connection alone: typed loosely for the callers' lambdas
    that bind loop values as defaults.)

    Only for operations that are safe to repeat (queries, scancel, the
    idempotent submit script).
    """
    conn = get(account)
    try:
        return operation(conn)
    except ssh.ClusterUnreachable as exc:
        log.info("SSH connection to %s failed (%s); reconnecting once", conn, exc)
        discard(account)
        return operation(get(account))  # (get() records the new connection's key id)
