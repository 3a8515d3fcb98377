"""An experiment's spec (YAML or JSON, docs/use/experiments.md): read and checked here, as
data, with one message per wrong field. Pure: no database, no Optuna.

    name: digits-sweep
    launch: {container: digits-demo, partition: cpu, command: sweep-digits --epochs 30}
    parameters:
      lr: {type: float, low: 0.001, high: 0.3, log: true}
      hidden: {type: int, low: 16, high: 128, step: 16}
      activation: [relu, tanh]          # a list is a choice
    method: bayesian                    # grid | random | bayesian
    objective: {metric: val_accuracy, goal: maximize, reduce: last}
    budget: {max_trials: 20, max_concurrent: 4}
    early_stopping: {method: median, min_trials: 5, warmup_steps: 3}
    folds: 5
    pass_arguments: true
    seed: 1
"""

from __future__ import annotations

import itertools
import json
import math
import re
from typing import Any

from common.bounded_yaml import (  # noqa: F401 - the spec's loader, named here too
    MAX_NUMBER_CHARS,
    MAX_SPEC_BYTES,
    SpecError,
    bounded,
    load,
)
from common.text import quoted

MAX_PARAMETERS = 20
MAX_CHOICES = 100
MAX_TRIALS = 10_000
MAX_CONCURRENT = 1_000
MAX_FOLDS = 20
NAME = re.compile(r"[a-z][a-z0-9_]{0,31}\Z")
PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,40}\Z")  # shown as is in a message; others quoted
METRIC = re.compile(r"[A-Za-z0-9_./-]{1,100}\Z")  # as the metrics client accepts keys
TOP_LEVEL = {
    "name",
    "launch",
    "parameters",
    "method",
    "objective",
    "budget",
    "early_stopping",
    "folds",
    "pass_arguments",
    "seed",
}


def _names(keys) -> str:
    """Unknown keys for a message: the first few, each quoted and cut."""
    names = sorted(str(k) for k in keys)
    shown = ", ".join(n if PLAIN_KEY.match(n) else quoted(n, 40) for n in names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parameter(name: str, raw: Any, errors: dict[str, str]) -> dict | None:
    """One parameter's definition, normalised: {"type": ..., ...}."""
    where = f"parameters.{name if PLAIN_KEY.match(name) else quoted(name, 40)}"
    if not NAME.match(name):
        errors[where] = (
            "A parameter's name is a lower-case letter, then letters, digits, _ (at most 32)."
        )
        return None
    if isinstance(raw, list):
        raw = {"type": "choice", "values": raw}
    if not isinstance(raw, dict):
        errors[where] = "Give {type: float|int|choice, ...} or a list of choices."
        return None
    kind = raw.get("type")
    unknown = set(raw) - {"type", "low", "high", "log", "step", "values"}
    if unknown:
        errors[where] = f"Unknown key(s): {_names(unknown)}."
        return None
    if kind == "choice":
        values = raw.get("values")
        if not isinstance(values, list) or not values or len(values) > MAX_CHOICES:
            errors[where] = f"A choice needs 1 to {MAX_CHOICES} values."
            return None
        for value in values:
            ok = (
                _number(value)
                or isinstance(value, bool)
                or (isinstance(value, str) and 0 < len(value) <= 100 and value.isprintable())
            )
            if not ok:
                errors[where] = (
                    f"Choice {quoted(value)}: values are numbers, true/false or short text."
                )
                return None
        if len({json.dumps(v) for v in values}) != len(values):
            errors[where] = "A choice's values must differ."
            return None
        return {"type": "choice", "values": values}
    if kind not in ("float", "int"):
        errors[where] = "type must be float, int or choice."
        return None
    low: Any = raw.get("low")
    high: Any = raw.get("high")
    log = raw.get("log", False)
    check = _int if kind == "int" else _number
    if not check(low) or not check(high):
        errors[where] = f"low and high must be {'whole ' if kind == 'int' else ''}numbers."
        return None
    if not low < high:
        errors[where] = "low must be below high."
        return None
    if not isinstance(log, bool):
        errors[where] = "log is true or false."
        return None
    if log and low <= 0:
        errors[where] = "A log scale needs low > 0."
        return None
    out: dict[str, Any] = {"type": kind, "low": low, "high": high, "log": log}
    step = raw.get("step")
    if step is not None:
        if kind != "int" or not _int(step) or step < 1 or log:
            errors[where] = "step is a whole number ≥ 1, for int parameters without log."
            return None
        out["step"] = step
    return out


def grid_values(definition: dict) -> list | None:
    """Every value of a parameter on a grid; None if it has no finite grid (a float range)."""
    if definition["type"] == "choice":
        return list(definition["values"])
    if definition["type"] == "int":
        return list(range(definition["low"], definition["high"] + 1, definition.get("step", 1)))
    return None


def grid(parameters: dict[str, dict]) -> list[dict]:
    """Every combination, in a fixed order (trial n is combination n)."""
    names = list(parameters)
    axes = [grid_values(parameters[n]) or [] for n in names]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*axes)]


def _section(data: dict, key: str, errors: dict[str, str]) -> dict:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        errors[key] = "Must be a mapping."
        return {}
    return value


def _whole(section: dict, key: str, where: str, default: int, low: int, high: int, errors) -> int:
    value = section.get(key, default)
    if not _int(value) or not low <= value <= high:
        errors[where] = f"A whole number from {low} to {high}."
        return default
    return value


def validate(data: dict) -> dict:
    """The experiment's fields (model names) from a spec mapping; the ``launch`` mapping is
    returned as given under "launch" (the job API's serializer checks it)."""
    bounded(data)
    errors: dict[str, str] = {}
    unknown = set(data) - TOP_LEVEL
    if unknown:
        errors["spec"] = f"Unknown key(s): {_names(unknown)}."
    name = data.get("name", "")
    if not isinstance(name, str) or len(name) > 100:
        errors["name"] = "At most 100 characters of text."
        name = ""
    launch = data.get("launch")
    if not isinstance(launch, dict):
        errors["launch"] = "The job every trial runs (the fields of POST /api/v1/jobs/)."
        launch = {}
    if launch.get("resumable") or launch.get("max_attempts", 1) not in (1, None):
        errors["launch.resumable"] = (
            "Trials run as members of job arrays, which do not checkpoint and requeue "
            "themselves: leave resumable and max_attempts out."
        )
    raw_params = data.get("parameters")
    parameters: dict[str, dict] = {}
    if not isinstance(raw_params, dict) or not raw_params:
        errors["parameters"] = "At least one parameter to search."
    elif len(raw_params) > MAX_PARAMETERS:
        errors["parameters"] = f"At most {MAX_PARAMETERS} parameters."
    else:
        for key, raw in raw_params.items():
            definition = parameter(str(key), raw, errors)
            if definition is not None:
                parameters[str(key)] = definition
    method = data.get("method", "bayesian")
    if method not in ("grid", "random", "bayesian"):
        errors["method"] = "grid, random or bayesian."
    objective = _section(data, "objective", errors)
    metric = objective.get("metric")
    if not isinstance(metric, str) or not METRIC.match(metric):
        errors["objective.metric"] = "The name of a metric the jobs log (e.g. val_accuracy)."
    goal = objective.get("goal", "maximize")
    if goal not in ("maximize", "minimize"):
        errors["objective.goal"] = "maximize or minimize."
    reduce = objective.get("reduce", "last")
    if reduce not in ("last", "best", "mean_last"):
        errors["objective.reduce"] = "last, best or mean_last."
    last_n = _whole(objective, "last_n", "objective.last_n", 5, 1, 10_000, errors)
    budget = _section(data, "budget", errors)
    max_trials = _whole(budget, "max_trials", "budget.max_trials", 20, 1, MAX_TRIALS, errors)
    max_concurrent = _whole(
        budget, "max_concurrent", "budget.max_concurrent", 4, 1, MAX_CONCURRENT, errors
    )
    stopping = _section(data, "early_stopping", errors)
    stop_method = stopping.get("method", "none") if stopping else "none"
    if stop_method not in ("none", "median", "asha"):
        errors["early_stopping.method"] = "none, median or asha."
    min_trials = _whole(stopping, "min_trials", "early_stopping.min_trials", 5, 1, 1000, errors)
    warmup = _whole(stopping, "warmup_steps", "early_stopping.warmup_steps", 0, 0, 10**9, errors)
    folds = _whole(data, "folds", "folds", 1, 1, MAX_FOLDS, errors)
    pass_arguments = data.get("pass_arguments", False)
    if not isinstance(pass_arguments, bool):
        errors["pass_arguments"] = "true or false."
    seed = _whole(data, "seed", "seed", 0, 0, 2**31 - 1, errors)
    if method == "grid" and parameters and "parameters" not in errors:
        floats = [n for n, d in parameters.items() if grid_values(d) is None]
        if floats:
            errors["parameters"] = (
                f"A grid needs listed values: give {', '.join(floats)} as a list of choices."
            )
        else:
            size = math.prod(len(grid_values(d) or []) for d in parameters.values())
            if size > MAX_TRIALS:
                errors["parameters"] = f"The grid has {size} combinations; at most {MAX_TRIALS}."
            max_trials = min(max_trials, size)
    if errors:
        raise SpecError(errors)
    return {
        "name": name,
        "launch": launch,
        "parameters": parameters,
        "method": method,
        "metric": metric,
        "goal": goal,
        "reduce": reduce,
        "last_n": last_n,
        "max_trials": max_trials,
        "max_concurrent": max_concurrent,
        "stopping": stop_method,
        "stopping_min_trials": min_trials,
        "stopping_warmup_steps": warmup,
        "folds": folds,
        "pass_arguments": pass_arguments,
        "seed": seed,
    }
