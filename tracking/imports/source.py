"""What every reader gives: a ``SourceRun`` whose ``points()`` yields the run's metric
points, filling in what it learns on the way (W&B's config and exit come as records among
the history). The bounds every import holds to are here, read from settings."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.conf import settings

# (series name, system metric?, step, wall time in seconds, value)
Point = tuple[str, bool, int, float, float]

MAX_NAME = 100
MAX_TEXT = 500  # characters of a parameter's or tag's value kept
MAX_PAIRS = 1000  # parameters, and tags, kept of a run
MAX_STEP = 2**62


class Unreadable(ValueError):
    """This run (or file) cannot be imported; str() says why in a sentence naming it."""


def max_file_bytes() -> int:
    return settings.PORTAL_IMPORT_MAX_FILE_BYTES


@dataclass
class SourceRun:
    """One run of a source. Subclasses read it lazily: ``points()`` may be called once."""

    source: str  # ImportedRun.Source
    run_id: str  # the source's own id of the run
    origin: str  # where it was read, for people
    name: str = ""
    state: str = "completed"  # the portal's State it ended in
    started: float | None = None  # seconds since the epoch
    ended: float | None = None
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The run's identity across imports (ImportedRun.key): its source and id."""
        key = f"{self.source}:{self.run_id}"
        if len(key) > 200:
            key = f"{self.source}:sha256:{hashlib.sha256(key.encode()).hexdigest()}"
        return key

    def points(self) -> Iterator[Point]:
        raise NotImplementedError

    def keep_param(self, key: object, value: object) -> None:
        _keep(self.params, key, value)

    def keep_tag(self, key: object, value: object) -> None:
        _keep(self.tags, key, value)


def _keep(into: dict[str, str], key: object, value: object) -> None:
    """A parameter or tag as text, cut to its bound; past MAX_PAIRS, left out."""
    if len(into) >= MAX_PAIRS and str(key) not in into:
        return
    text = value if isinstance(value, str) else str(value)
    into[str(key)[:250]] = text[:MAX_TEXT]


_SERIES_CHARS = re.compile(r"[^A-Za-z0-9_.:/@+-]+")


def series_name(raw: str) -> str:
    """A source's metric name as a portal series key (metrics/ingest.KEY): other
    characters become ``_``, cut to 100."""
    return (_SERIES_CHARS.sub("_", raw).strip("/") or "_")[:100]


def finite(value: object) -> float | None:
    """The value as a float if it is a finite number (a NaN or inf is left out, as live)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def step_of(value: object) -> int:
    """A step within what the store keeps (0 ≤ step < 2^62); anything else is 0."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_STEP:
        return 0
    return value
