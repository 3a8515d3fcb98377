"""The request id: one per HTTP request (HAProxy's ``X-Request-ID`` where it sent a
well-formed one, else made here), carried into the Celery tasks the request queues (a
message header), the log lines written meanwhile (ops/logs.py), the audit rows
(identity/audit) and the key id of the SSH certificates issued for it (clusters/certs.py),
which sshd logs at login. So one id finds a submission's web line, its worker's lines,
its audit row and its login on the cluster."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

request_id: ContextVar[str] = ContextVar("request_id", default="")
# Who, which job and which cluster the code runs for, where it knows (bind()): added to
# every log line written meanwhile (ops/logs.py). Names only from FIELDS.
FIELDS = ("user", "job", "cluster")
_bound: ContextVar[tuple[tuple[str, str], ...]] = ContextVar("bound", default=())

# What may come from outside (a header, a task message, the signer's request): short and
# plain, so that it is safe in a log line, a header and a certificate's key id.
_WELL_FORMED = re.compile(r"[A-Za-z0-9_-]{8,64}")


def well_formed(value: object) -> str:
    """``value`` where it is a well-formed id, else ""."""
    return value if isinstance(value, str) and _WELL_FORMED.fullmatch(value) else ""


def new_id() -> str:
    return secrets.token_hex(8)


def current() -> str:
    return request_id.get()


@contextmanager
def bind(**values: object) -> Iterator[None]:
    """The block's log lines name these (``user``, ``job``, ``cluster``; None: unknown)."""
    known = dict(_bound.get())
    known.update(
        {
            name: str(value)[:100]
            for name, value in values.items()
            if name in FIELDS and value is not None
        }
    )
    token = _bound.set(tuple(known.items()))
    try:
        yield
    finally:
        _bound.reset(token)


def bound() -> dict[str, str]:
    return dict(_bound.get())
