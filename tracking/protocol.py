"""The MLflow REST API's messages, read and written as pure functions: a request's JSON
(or query) to checked values, and experiments and runs to the JSON MLflow's client reads
(``mlflow.store.tracking.rest_store.RestStore``; tested with the clients that docs/use/existing-logging.md names).

Bounded as MLflow's own server bounds them (``mlflow/utils/validation.py``: keys of 250
characters, parameter values of 6,000, tag values of 8,000, 1,000 metrics and 100
parameters and tags a batch) and then as the portal's metric store does
(metrics/ingest.py: finite values, its quotas). Nothing here touches the database."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

MAX_BODY_BYTES = 1_000_000  # MLflow's MAX_BATCH_LOG_REQUEST_SIZE
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_TAGS_PER_BATCH = 100
MAX_KEY_CHARS = 250
MAX_PARAM_VALUE_CHARS = 6000
MAX_TAG_VALUE_CHARS = 8000
MAX_EXPERIMENT_NAME_CHARS = 500
MAX_PARAMS_PER_RUN = 1000
MAX_TAGS_PER_RUN = 200
MAX_RUNS_PER_JOB = 100
MAX_SEARCH_RESULTS = 1000
INT64 = 2**63 - 1
STEP_LIMIT = 2**62  # the portal's bound on a step (metrics/ingest.py)

# MLflow's error codes (databricks_pb2.ErrorCode) and the HTTP status its server gives them.
INVALID = ("INVALID_PARAMETER_VALUE", 400)
BAD_REQUEST = ("BAD_REQUEST", 400)
NOT_FOUND = ("RESOURCE_DOES_NOT_EXIST", 404)
EXISTS = ("RESOURCE_ALREADY_EXISTS", 400)
EXHAUSTED = ("RESOURCE_EXHAUSTED", 400)  # not 429: the client would retry a quota for minutes
UNAUTHENTICATED = ("UNAUTHENTICATED", 401)
PERMISSION = ("PERMISSION_DENIED", 403)
NO_ENDPOINT = ("ENDPOINT_NOT_FOUND", 404)
INVALID_STATE = ("INVALID_STATE", 400)
LIMITED = ("REQUEST_LIMIT_EXCEEDED", 429)  # the per-job rate: the client waits and retries


class ApiError(Exception):
    """An answer MLflow's client turns into an ``MlflowException`` with this message."""

    def __init__(self, kind: tuple[str, int], message: str) -> None:
        super().__init__(message)
        self.code, self.status = kind
        self.message = message

    def body(self) -> dict[str, str]:
        return {"error_code": self.code, "message": self.message}


# -- reading ---------------------------------------------------------------------------------


def text(body: dict, name: str, limit: int, *, required: bool = True, default: str = "") -> str:
    """A string field of at most ``limit`` characters (no NUL: PostgreSQL cannot store it)."""
    value = body.get(name)
    if value is None or value == "":
        if required:
            raise ApiError(INVALID, f"Missing value for required parameter '{name}'.")
        return default
    if not isinstance(value, str):
        raise ApiError(INVALID, f"'{name}' must be a string.")
    if len(value) > limit:
        raise ApiError(INVALID, f"'{name}' is {len(value)} characters; at most {limit}.")
    if "\x00" in value:
        raise ApiError(INVALID, f"'{name}' holds a NUL character.")
    return value


def integer(body: dict, name: str, *, default: int | None = None, low=-INT64, high=INT64) -> int:
    """An int64 field: a JSON number, or a string of digits (protobuf's JSON for int64)."""
    value = body.get(name)
    if value is None or value == "":
        if default is None:
            raise ApiError(INVALID, f"Missing value for required parameter '{name}'.")
        return default
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,19}", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ApiError(INVALID, f"'{name}' must be a whole number from {low} to {high}.")
    return value


def number(value: Any, name: str) -> float:
    """A double: a JSON number, or MLflow's ``NaN``/``Infinity`` (as literals or strings)."""
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ApiError(INVALID, f"'{name}' must be a number.")
    try:
        return float(value)
    except OverflowError:  # a JSON integer past a double
        return math.inf if value > 0 else -math.inf


@dataclass(frozen=True)
class Metric:
    key: str
    value: float
    timestamp: int  # ms
    step: int


def metric(raw: Any) -> Metric:
    if not isinstance(raw, dict):
        raise ApiError(INVALID, "A metric is an object with key, value, timestamp and step.")
    return Metric(
        key=text(raw, "key", MAX_KEY_CHARS),
        value=number(raw.get("value"), "value"),
        timestamp=integer(raw, "timestamp", low=0),
        step=integer(raw, "step", default=0, low=-STEP_LIMIT, high=STEP_LIMIT),
    )


def metrics(items: Any) -> list[Metric]:
    if items is None:
        return []
    if not isinstance(items, list):
        raise ApiError(INVALID, "'metrics' must be a list.")
    if len(items) > MAX_METRICS_PER_BATCH:
        raise ApiError(INVALID, f"A batch holds at most {MAX_METRICS_PER_BATCH} metrics.")
    return [metric(raw) for raw in items]


def pairs(items: Any, what: str, limit: int) -> dict[str, str]:
    """MLflow's ``[{"key": ..., "value": ...}]`` (params, tags) as a dict, checked."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise ApiError(INVALID, f"'{what}' must be a list.")
    if len(items) > MAX_PARAMS_TAGS_PER_BATCH:
        raise ApiError(INVALID, f"A batch holds at most {MAX_PARAMS_TAGS_PER_BATCH} {what}.")
    out: dict[str, str] = {}
    for raw in items:
        if not isinstance(raw, dict):
            raise ApiError(INVALID, f"Each of '{what}' is an object with key and value.")
        out[text(raw, "key", MAX_KEY_CHARS)] = text(raw, "value", limit, required=False)
    return out


# -- the portal's series -----------------------------------------------------------------------

NOT_KEY = re.compile(r"[^A-Za-z0-9_.:/@+-]")


def series_key(key: str) -> str:
    """MLflow's metric key as a portal series name (metrics/ingest.py's KEY: 1-100 of
    letters, digits and ``_ . : / @ + -``): another character becomes ``_``, a longer key
    is cut at 100. MLflow allows spaces and 250 characters; a script's keys are kept
    where they fit, which every framework's own keys do."""
    return NOT_KEY.sub("_", key)[:100]


def seq(timestamp: int, step: int) -> int:
    """The point's sequence number in its series, from what MLflow identifies it by (its
    time in milliseconds and its step): the same point sent twice (a retried batch) is
    stored once, later points have larger numbers (as the portal's live charts expect).
    Two values of one series at the same millisecond and step keep the first."""
    return ((timestamp & (2**42 - 1)) << 20) | (step & (2**20 - 1))  # < 2**62 until 2109


# -- writing -----------------------------------------------------------------------------------


def ms(when) -> int:
    """A time as MLflow's answers give it: milliseconds since the epoch."""
    return int(when.timestamp() * 1000)


def listed(values: dict[str, str]) -> list[dict[str, str]]:
    return [{"key": k, "value": v} for k, v in values.items()]


def experiment_json(experiment_id: str, name: str, created_ms: int, artifact_root: str) -> dict:
    return {
        "experiment_id": experiment_id,
        "name": name,
        "artifact_location": artifact_root,
        "lifecycle_stage": "active",
        "creation_time": created_ms,
        "last_update_time": created_ms,
        "tags": [],
    }
