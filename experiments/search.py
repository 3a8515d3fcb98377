"""The search, by Optuna: its samplers choose configurations, its pruners stop trials
early, its PED-ANOVA estimates which parameters matter. The portal's database is the
storage: each call rebuilds an in-memory study from the recorded trials (``Observed``),
so no worker, file or SQLite database holds state between calls, and no compute node
talks to anything. Pure given its inputs: tests call it directly."""

from __future__ import annotations

import statistics
import warnings
from dataclasses import dataclass, field, replace

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState, create_trial

from experiments import spec

optuna.logging.set_verbosity(optuna.logging.WARNING)

STATES = {
    "running": TrialState.RUNNING,
    "complete": TrialState.COMPLETE,
    "pruned": TrialState.PRUNED,
    "fail": TrialState.FAIL,
}


@dataclass
class Observed:
    """A trial as the search sees it."""

    number: int
    params: dict
    state: str  # a key of STATES
    value: float | None = None
    intermediate: dict[int, float] = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    """What of an experiment the search needs (Experiment's fields of the same names)."""

    parameters: dict
    method: str = "bayesian"
    goal: str = "maximize"
    max_trials: int = 20
    stopping: str = "none"
    stopping_min_trials: int = 5
    stopping_warmup_steps: int = 0
    seed: int = 0

    @classmethod
    def of(cls, experiment) -> Settings:
        values = {name: getattr(experiment, name) for name in cls.__dataclass_fields__}
        return cls(**{**values, "parameters": experiment.space})


def distributions(parameters: dict) -> dict[str, BaseDistribution]:
    out: dict[str, BaseDistribution] = {}
    for name, d in parameters.items():
        if d["type"] == "choice":
            out[name] = CategoricalDistribution(d["values"])
        elif d["type"] == "int":
            out[name] = IntDistribution(d["low"], d["high"], log=d["log"], step=d.get("step", 1))
        else:
            out[name] = FloatDistribution(d["low"], d["high"], log=d["log"])
    return out


def sampler(settings: Settings, salt: int) -> optuna.samplers.BaseSampler:
    """Random, or TPE (a Bayesian optimiser) with the constant liar, so that configurations
    asked while others still run are spread out rather than repeated. ``salt`` makes each
    batch's draws differ yet repeat for the same history."""
    seed = (settings.seed * 1_000_003 + salt) % 2**31
    if settings.method == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=seed,
            n_startup_trials=max(2, min(10, settings.max_trials // 4)),
            multivariate=True,
            constant_liar=True,
        )


def pruner(settings: Settings) -> optuna.pruners.BasePruner:
    if settings.stopping == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=settings.stopping_min_trials,
            n_warmup_steps=settings.stopping_warmup_steps,
        )
    if settings.stopping == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=max(1, settings.stopping_warmup_steps), reduction_factor=ASHA_REDUCTION
        )
    return optuna.pruners.NopPruner()


ASHA_REDUCTION = 3


def _rung_attrs(settings: Settings, trial: Observed) -> dict:
    """A trial's successive-halving rungs: those the pruner recorded while it ran, and for
    rungs it passed between two controller steps (or before stopping began), its value at
    the first logged step at or after the rung's step, as the pruner would have seen it."""
    attrs = dict(trial.attrs)
    if settings.stopping != "asha" or not trial.intermediate:
        return attrs
    steps = sorted(trial.intermediate)
    rung = 0
    while True:
        promotion = max(1, settings.stopping_warmup_steps) * ASHA_REDUCTION**rung
        reached = [s for s in steps if s >= promotion]
        if not reached:
            return attrs
        attrs.setdefault(f"completed_rung_{rung}", trial.intermediate[reached[0]])
        rung += 1


def study(settings: Settings, observed: list[Observed], salt: int = 0) -> optuna.Study:
    """An in-memory study holding ``observed``, in trial order."""
    dists = distributions(settings.parameters)
    result = optuna.create_study(
        direction="maximize" if settings.goal == "maximize" else "minimize",
        sampler=sampler(settings, salt),
        pruner=pruner(settings),
    )
    for trial in sorted(observed, key=lambda t: t.number):
        state = STATES[trial.state]
        if state == TrialState.COMPLETE and trial.value is None:
            state = TrialState.FAIL
        result.add_trial(
            create_trial(
                params=trial.params,
                distributions=dists,
                value=trial.value if state == TrialState.COMPLETE else None,
                intermediate_values=trial.intermediate,
                state=state,
                system_attrs=trial.attrs
                if state == TrialState.RUNNING
                else _rung_attrs(settings, trial),
            )
        )
    return result


def suggest(settings: Settings, observed: list[Observed], count: int) -> list[dict]:
    """The next ``count`` configurations (fewer when a grid runs out)."""
    if count <= 0:
        return []
    first = len(observed)
    if settings.method == "grid":
        combos = spec.grid(settings.parameters)
        return combos[first : min(first + count, len(combos))]
    dists = distributions(settings.parameters)
    current = study(settings, observed, salt=first)
    return [current.ask(dists).params for _ in range(count)]


@dataclass(frozen=True)
class Verdict:
    stop: bool
    reason: str = ""
    attrs: dict = field(default_factory=dict)  # the pruner's attributes to keep


def should_stop(settings: Settings, observed: list[Observed], number: int) -> Verdict:
    """Whether running trial ``number`` should stop now (stop_verdicts for one trial)."""
    return stop_verdicts(settings, observed, [number])[number]


def stop_verdicts(
    settings: Settings, observed: list[Observed], numbers: list[int]
) -> dict[int, Verdict]:
    """Whether each running trial of ``numbers`` should stop now, by the experiment's rule,
    with the reason in words. No trial stops before ``stopping_min_trials`` others have
    finished. One study serves them all (built once, only if some trial has a curve), so a
    controller step costs the size of the history, not that times the running trials; the
    pruner sees the rungs the trials asked before it recorded (as in one Optuna storage)."""
    verdicts = {number: Verdict(False) for number in numbers}
    if settings.stopping == "none":
        return verdicts
    by_number = {t.number: t for t in observed}
    asked = [
        by_number[n]
        for n in numbers
        if n in by_number and by_number[n].state == "running" and by_number[n].intermediate
    ]
    if not asked:
        return verdicts
    finished = [t for t in observed if t.state in ("complete", "pruned") and t.intermediate]
    current = study(settings, observed)
    # Optuna numbers the rebuilt study's trials 0, 1, … in the order they were added.
    frozen_trials = current.get_trials(deepcopy=False)
    position = {number: i for i, number in enumerate(sorted(by_number))}
    for target in asked:
        trial_id = frozen_trials[position[target.number]]._trial_id
        frozen = current._storage.get_trial(trial_id)  # with the rungs recorded so far
        stop = current.pruner.prune(current, frozen)  # also records the rungs it passed
        attrs = dict(current._storage.get_trial(trial_id).system_attrs)
        if not stop or len(finished) < settings.stopping_min_trials:
            verdicts[target.number] = Verdict(False, attrs=attrs)
            continue
        step = max(target.intermediate)
        verdicts[target.number] = Verdict(True, _reason(settings, finished, target, step), attrs)
    return verdicts


def _reason(settings: Settings, finished: list[Observed], target: Observed, step: int) -> str:
    value = target.intermediate[step]
    if settings.stopping == "median":
        others = [t.intermediate[step] for t in finished if step in t.intermediate]
        middle = statistics.median(others) if others else float("nan")
        return (
            f"Stopped early by the median rule at step {step}: its value {value:.4g} is "
            f"worse than the median {middle:.4g} of {len(others)} earlier trials at that step."
        )
    return (
        f"Stopped early by successive halving at step {step}: its value {value:.4g} is "
        "not in the best third of the trials that reached that rung."
    )


def importances(settings: Settings, observed: list[Observed]) -> dict[str, float]:
    """Optuna's PED-ANOVA estimate of each parameter's share in the objective's spread over
    the completed trials ({} until there are enough of them to say)."""
    # Parameters and values only: the study copies each trial whole, curves and all.
    complete = [
        replace(t, intermediate={}, attrs={})
        for t in observed
        if t.state == "complete" and t.value is not None
    ]
    if len(complete) < 4 or len(settings.parameters) < 1:
        return {}
    current = study(settings, complete)
    try:
        from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = get_param_importances(current, evaluator=PedAnovaImportanceEvaluator())
    except (ValueError, RuntimeError, ZeroDivisionError):
        return {}
    return {name: float(v) for name, v in result.items()}
