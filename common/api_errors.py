"""One error format for every API failure:

{"error": {"status": 400, "code": "invalid", "message": "...", "fields": {"gpus": ["..."]}}}
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError as DatabaseInterfaceError
from django.db import OperationalError as DatabaseOperationalError
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

log = logging.getLogger(__name__)


class Refusal(Exception):
    """A rule of an app's service said no: a message for the person and an HTTP status
    (the service's own errors subclass it; the API answers them with ``Refused``)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class Refused(APIException):
    """A ``Refusal`` in the API's one error format, with its status."""

    CODES = {403: "permission_denied", 404: "not_found", 409: "conflict"}

    def __init__(self, error: Refusal):
        super().__init__(str(error), self.CODES.get(error.status, "invalid"))
        self.status_code = error.status


class TooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"
    default_detail = "The request body is larger than this portal accepts; send less per request."


class ServiceUnavailable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "unavailable"
    default_detail = (
        "The portal's queue and cache (Redis) cannot be reached just now; nothing was "
        "changed. Try again in a few seconds."
    )


class DatabaseUnavailable(ServiceUnavailable):
    default_code = "unavailable"
    default_detail = (
        "The portal's database cannot be reached just now (it may be restarting). Try "
        "again in a few seconds."
    )


# What Redis (cache, throttling, broker) raises while it is down or restarting.
REDIS_DOWN = (RedisConnectionError, RedisTimeoutError, KombuOperationalError)
# What Django raises while the database does not answer: refused or dropped connections,
# a connection that broke under a request (PostgreSQL restarting, SQLite locked too long).
DATABASE_DOWN = (DatabaseOperationalError, DatabaseInterfaceError)
# Seconds a client is asked to wait before it tries again (the Retry-After header).
RETRY_AFTER = "5"


def _flatten(value) -> list[str]:
    if isinstance(value, dict):
        return [f"{k}: {m}" for k, v in value.items() for m in _flatten(v)]
    if isinstance(value, list):
        return [m for v in value for m in _flatten(v)]
    return [str(value)]


def error_body(status_code: int, code: str, message: str, fields=None) -> dict:
    """The API's error format: every error answer, from DRF views or the outage middleware."""
    return {
        "error": {"status": status_code, "code": code, "message": message, "fields": fields or {}}
    }


def exception_handler(exc, context):
    if isinstance(exc, RequestDataTooBig):  # Django's DATA_UPLOAD_MAX_MEMORY_SIZE
        exc = TooLarge()
    if isinstance(exc, REDIS_DOWN):
        exc = ServiceUnavailable()
    if isinstance(exc, DATABASE_DOWN):
        log.warning("database unavailable: %s", str(exc).strip()[:200])
        exc = DatabaseUnavailable()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ServiceUnavailable):
        response["Retry-After"] = RETRY_AFTER
    data = response.data
    fields: dict[str, list[str]] = {}
    message = ""
    code = getattr(exc, "default_code", "error")
    if isinstance(data, dict) and "detail" in data and len(data) == 1:
        message = str(data["detail"])
        code = getattr(data["detail"], "code", code)
    elif isinstance(data, dict):
        for key, value in data.items():
            if key in ("non_field_errors", "__all__"):
                message = " ".join(_flatten(value))
            else:
                fields[key] = _flatten(value)
        if not message:  # the details are in "fields", one message per field
            message = f"Please correct: {', '.join(fields)}."
    else:
        message = " ".join(_flatten(data))
    response.data = error_body(response.status_code, str(code), message, fields)
    return response


if TYPE_CHECKING:
    _View = APIView
else:
    _View = object


class RefuseNul(_View):
    """NUL characters cannot be stored or compared by PostgreSQL: such a path or query
    value is bad input (400), not a database error (500)."""

    def initial(self, request, *args, **kwargs):
        if "\x00" in request.path or any(
            "\x00" in key or "\x00" in value for key, value in request.query_params.items()
        ):
            raise ValidationError({"non_field_errors": ["NUL characters are not allowed."]})
        super().initial(request, *args, **kwargs)
