"""Log lines: one JSON object per line in production (python-json-logger), readable
console lines in demo mode; each carries the request id of what it was written for
(common/context.py), and never a secret: values that look like the portal's tokens,
passwords in URLs or private keys are masked before a line is written."""

from __future__ import annotations

import logging
import re

from pythonjsonlogger.json import JsonFormatter

from common import context

# The portal's own secrets by their shape: API tokens (pp_…), upload tokens (pm_…),
# session-link codes and register secrets handed out in URLs, a read link's token in its
# path (/links/<token>/: whoever reads the access log could open the runs), a password in
# a URL, an Authorization header's value, and a private key block.
_SECRETS = [
    (re.compile(r"\b(p[pm]_)[A-Za-z0-9_-]{8,}"), r"\1***"),
    (re.compile(r"(/links/)[A-Za-z0-9_-]{16,}"), r"\1***"),
    (re.compile(r"(://[^/\s:@]*:)[^@\s/]+@"), r"\1***@"),
    (
        re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?(?:bearer|token|basic)\s+)[^\s'\",]+"),
        r"\1***",
    ),
    (re.compile(r"(?i)((?:password|secret|token)['\"]?\s*[:=]\s*['\"]?)[^\s'\",&]{4,}"), r"\1***"),
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
        "[private key]",
    ),
]


def mask(text: str) -> str:
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


class Context(logging.Filter):
    """Adds ``request_id`` to every record ("-" outside a request or task), and the user,
    job and cluster the code was bound to (common.context.bind)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = context.current() or "-"
        for name, value in context.bound().items():  # (JSON lines show them; console not)
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class Chatter(logging.Filter):
    """What repeats by itself goes out at DEBUG, so a console shows what a person needs
    (addresses, errors, jobs changing state): beat sending its periodic tasks every few
    seconds and the worker receiving and finishing each task. On the console format only
    (JSON lines keep them for a log collector: portal/settings/computed.py); shown with
    LOG_LEVEL=DEBUG; a task's failure keeps its level. (The health checks' access lines
    are the access log's own: ops/middleware.py.)"""

    TASK_LINES = ("celery.app.trace", "celery.worker.strategy")
    BEAT_SENDS = "Scheduler: Sending due task"

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO:
            return True
        if record.name in self.TASK_LINES or (
            record.name == "celery.beat" and str(record.msg).startswith(self.BEAT_SENDS)
        ):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True


class Console(logging.Formatter):
    """Demo mode's readable lines, secrets masked (tracebacks too)."""

    def format(self, record: logging.LogRecord) -> str:
        return mask(super().format(record))


class Json(JsonFormatter):
    """Production's lines: one JSON object each, secrets masked (tracebacks too)."""

    def format(self, record: logging.LogRecord) -> str:
        return mask(super().format(record))
