"""The search (Optuna on a study rebuilt from recorded trials): pure functions."""

import math

import pytest

from experiments import search, spec

SPACE = spec.validate(
    {
        "launch": {},
        "parameters": {
            "x": {"type": "float", "low": -5.0, "high": 5.0},
            "k": ["a", "b"],
        },
        "objective": {"metric": "m"},
    }
)["parameters"]


def settings(**kw) -> search.Settings:
    return search.Settings(parameters=kw.pop("parameters", SPACE), **kw)


def done(number, params, value, curve=None):
    return search.Observed(number, params, "complete", value, curve or {})


def test_grid_numbers_its_combinations_and_runs_out():
    grid = settings(method="grid", parameters={"a": {"type": "choice", "values": [1, 2, 3]}})
    assert search.suggest(grid, [], 2) == [{"a": 1}, {"a": 2}]
    seen = [done(0, {"a": 1}, 0.0), done(1, {"a": 2}, 0.0)]
    assert search.suggest(grid, seen, 5) == [{"a": 3}]


def test_random_and_bayesian_proposals_lie_in_the_space_and_repeat_for_the_same_history():
    for method in ("random", "bayesian"):
        first = search.suggest(settings(method=method, seed=7), [], 4)
        assert first == search.suggest(settings(method=method, seed=7), [], 4)
        assert all(-5 <= p["x"] <= 5 and p["k"] in ("a", "b") for p in first)


def test_bayesian_search_moves_towards_the_optimum_it_has_seen():
    """Maximise -(x-2)^2: after 12 scored random points, TPE's next proposals lie nearer
    x = 2 than random search's from the same history (5 seeds, 10 proposals each)."""
    rng_points = search.suggest(settings(method="random", seed=1), [], 12)
    seen = [done(i, p, -((p["x"] - 2) ** 2)) for i, p in enumerate(rng_points)]

    def distance(method: str) -> float:
        proposals = [
            p
            for seed in range(5)
            for p in search.suggest(settings(method=method, seed=seed, max_trials=40), seen, 10)
        ]
        return sum(abs(p["x"] - 2) for p in proposals) / len(proposals)

    assert distance("bayesian") < 0.6 * distance("random")


def test_running_trials_count_so_a_batch_is_not_the_same_point_four_times():
    proposals = search.suggest(settings(method="bayesian", seed=2), [], 4)
    assert len({round(p["x"], 6) for p in proposals}) == 4


def test_the_median_rule_stops_a_trial_below_the_median_and_says_so():
    finished = [done(i, {"x": 0.0, "k": "a"}, 1.0, {1: 0.5, 2: 0.8, 3: 0.9}) for i in range(3)]
    poor = search.Observed(3, {"x": 1.0, "k": "b"}, "running", None, {1: 0.1, 2: 0.2})
    good = search.Observed(4, {"x": 1.0, "k": "b"}, "running", None, {1: 0.6, 2: 0.85})
    rule = settings(stopping="median", stopping_min_trials=3)
    verdict = search.should_stop(rule, [*finished, poor, good], 3)
    assert verdict.stop
    assert verdict.reason == (
        "Stopped early by the median rule at step 2: its value 0.2 is worse than the "
        "median 0.8 of 3 earlier trials at that step."
    )
    assert not search.should_stop(rule, [*finished, poor, good], 4).stop
    # Not before min_trials have finished, nor during the warm-up steps.
    assert not search.should_stop(
        settings(stopping="median", stopping_min_trials=4), [*finished, poor], 3
    ).stop
    warm = settings(stopping="median", stopping_min_trials=3, stopping_warmup_steps=5)
    assert not search.should_stop(warm, [*finished, poor], 3).stop


def test_minimising_reverses_the_median_rule():
    finished = [done(i, {"x": 0.0, "k": "a"}, 1.0, {1: 0.5, 2: 0.3}) for i in range(3)]
    high_loss = search.Observed(3, {"x": 1.0, "k": "b"}, "running", None, {1: 0.9, 2: 0.8})
    rule = settings(stopping="median", stopping_min_trials=3, goal="minimize")
    assert search.should_stop(rule, [*finished, high_loss], 3).stop


def test_successive_halving_keeps_its_rungs_between_calls():
    """Finished trials' rungs come from their curves (they may have passed a rung between
    two controller steps); a running trial's rungs are what the pruner recorded."""
    finished = [done(i, {"x": 0.0, "k": "a"}, 1.0, {1: 0.9, 3: 0.95}) for i in range(5)]
    trial = search.Observed(5, {"x": 1.0, "k": "b"}, "running", None, {1: 0.1})
    rule = settings(stopping="asha", stopping_min_trials=2, stopping_warmup_steps=1)
    verdict = search.should_stop(rule, [*finished, trial], 5)
    assert verdict.stop and "successive halving at step 1" in verdict.reason
    assert verdict.attrs == {"completed_rung_0": 0.1}
    # A good trial passes rung 0 and is kept; its rung is recorded for the next call.
    good = search.Observed(5, {"x": 1.0, "k": "b"}, "running", None, {1: 0.95})
    verdict = search.should_stop(rule, [*finished, good], 5)
    assert not verdict.stop and verdict.attrs == {"completed_rung_0": 0.95}


def test_importance_names_the_parameter_that_matters():
    points = search.suggest(settings(method="random", seed=5), [], 30)
    seen = [done(i, p, -abs(p["x"])) for i, p in enumerate(points)]
    found = search.importances(settings(), seen)
    assert set(found) == {"x", "k"} and found["x"] > found["k"]
    assert math.isclose(sum(found.values()), 1.0, rel_tol=1e-6)
    assert search.importances(settings(), seen[:3]) == {}


@pytest.mark.parametrize("state", ["fail", "pruned"])
def test_failed_and_stopped_trials_are_history_not_results(state):
    trials = [search.Observed(0, {"x": 0.0, "k": "a"}, state, None, {1: 0.3})]
    study = search.study(settings(), trials)
    assert study.trials[0].state.name == {"fail": "FAIL", "pruned": "PRUNED"}[state]
