"""Which of a run's checkpoints a policy keeps, and why (pure: no database, no cluster).

A checkpoint's step comes from its name: ``step=120``, ``step_120`` or ``step-120`` where
it says so (Lightning's ``epoch=3-step=120.ckpt``), otherwise the last number in it
(``checkpoint-500``, ``ckpt_000120.pt``). Its value is the policy's metric at the last
step logged at or before it. Kept, in this order of reasons: a registered model
version's files (or a folder holding them), a name without a step or that does not read
as UTF-8, the latest ``keep_latest`` by step, the best ``keep_best`` by the metric. The
rest is deleted. A policy that ranks by a metric the run never logged at its
checkpoints' steps deletes nothing (PlanError): "best" would mean nothing."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

_STEP = re.compile(r"(?:^|[^a-z])step[=_-]?([0-9]{1,18})(?![0-9])", re.I)
_NUMBER = re.compile(r"[0-9]{1,18}")


class PlanError(Exception):
    """Why a plan deletes nothing (a message for the person)."""


@dataclass(frozen=True)
class Rule:
    keep_best: int = 1
    metric: str = ""
    mode: str = "min"  # "min": lower is better (a loss); "max": higher (an accuracy)
    keep_latest: int = 1


@dataclass(frozen=True)
class Item:
    path: str
    bytes: int
    step: int | None
    value: float | None
    keep: bool
    why: str

    def as_dict(self) -> dict:
        return asdict(self)


def step_of(path: str) -> int | None:
    """The training step a checkpoint's name says (None: it says none)."""
    name = posixpath.basename(path.rstrip("/"))
    said = _STEP.search(name)
    if said:
        return int(said[1])
    stem = re.sub(r"\.[A-Za-z][A-Za-z0-9]{0,11}$", "", name)
    numbers = _NUMBER.findall(stem)
    return int(numbers[-1]) if numbers else None


def value_at(points: list[tuple[int, float]], step: int) -> float | None:
    """The value logged at the last step at or before ``step`` (points sorted by step)."""
    found = None
    for at, value in points:
        if at > step:
            break
        found = value
    return found


def covers(a: str, b: str) -> bool:
    """Whether the paths are one, or one holds the other."""
    return a == b or b.startswith(a.rstrip("/") + "/") or a.startswith(b.rstrip("/") + "/")


def plan(
    found: Iterable[tuple[str, int]],
    rule: Rule,
    values: Mapping[int, float | None],
    protected: Mapping[str, str],
) -> list[Item]:
    """Every checkpoint (relative path, bytes on disk) with its verdict, by step.
    ``values``: the
    metric at each checkpoint's step; ``protected``: relative paths of registered
    versions' files in the run's folder -> what they are (``digits v3``)."""
    items = sorted(
        ((path, size, step_of(path)) for path, size in found),
        key=lambda i: (i[2] is None, i[2] or 0, i[0]),
    )
    verdicts: dict[str, tuple[bool, str]] = {}
    for path, _, step in items:
        holder = next((what for at, what in protected.items() if covers(path, at)), None)
        if holder is not None:
            verdicts[path] = (True, f"registered: {holder}")
        elif "\ufffd" in path:
            verdicts[path] = (True, "its name does not read as UTF-8")
        elif step is None:
            verdicts[path] = (True, "no step in its name")
    open_ = [(p, s, st) for p, s, st in items if p not in verdicts and st is not None]
    by_step = sorted(open_, key=lambda i: (i[2], i[0]), reverse=True)
    for path, _, _ in by_step[: rule.keep_latest]:
        verdicts[path] = (True, f"one of the latest {rule.keep_latest}")
    if rule.keep_best:
        if not rule.metric:
            raise PlanError("The policy keeps the best checkpoints but names no metric.")
        scored = [(p, values.get(st)) for p, _, st in open_ if st is not None]
        ranked = [(p, v) for p, v in scored if v is not None and v == v]
        if open_ and not ranked:
            raise PlanError(
                f"The run logged no {rule.metric} at or before its checkpoints' steps: "
                "nothing is deleted (the best cannot be told)."
            )
        ranked.sort(key=lambda pv: pv[1] if rule.mode == "min" else -pv[1])
        for path, _ in ranked[: rule.keep_best]:
            if path not in verdicts:
                verdicts[path] = (True, f"one of the best {rule.keep_best} by {rule.metric}")
    what = f"the latest {rule.keep_latest}"
    if rule.keep_best:
        what = f"the best {rule.keep_best} by {rule.metric} nor {what}"
    return [
        Item(
            path,
            size,
            step,
            values.get(step) if step is not None else None,
            *verdicts.get(path, (False, f"not among {what}")),
        )
        for path, size, step in items
    ]
