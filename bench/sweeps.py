"""Bayesian (Optuna's TPE, as the portal runs it) against random search, same budget.

The objective is cheap and synthetic, so the comparison needs no cluster: a 4-parameter
stand-in for a training run with the demo's search space (learning rate on a log scale,
hidden size in steps, dropout, L2 on a log scale) whose error has one basin, a noisy
evaluation and a flat tail, like a validation error surface. Both methods go through the
portal's own code (experiments.search.suggest): the in-memory study rebuilt from the
recorded trials for every batch of 4 configurations (4 jobs at a time), the constant liar
for configurations still "running" — exactly the experiment controller's loop.

Prints, over several seeds, the median best error after the budget, the ratio random /
Bayesian (above 1: Bayesian ends lower), how often Bayesian wins, and the trials random
search needs to reach Bayesian's median result.

    .venv/bin/python bench/sweeps.py [--trials 40] [--batch 4] [--seeds 10]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments import search, spec  # noqa: E402

SPACE = spec.validate(
    {
        "launch": {},
        "parameters": {
            "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
            "hidden": {"type": "int", "low": 16, "high": 256, "step": 16},
            "dropout": {"type": "float", "low": 0.0, "high": 0.7},
            "l2": {"type": "float", "low": 1e-7, "high": 1e-1, "log": True},
        },
        "objective": {"metric": "val_error"},
    }
)["parameters"]


def val_error(p: dict, rng: random.Random) -> float:
    """A validation error: best near lr 0.03, hidden 128, dropout 0.2, l2 1e-4."""
    x = (math.log10(p["lr"]) + 1.5) ** 2
    x += ((p["hidden"] - 128) / 96) ** 2
    x += ((p["dropout"] - 0.2) / 0.25) ** 2
    x += 0.3 * (math.log10(p["l2"]) + 4) ** 2 / 9
    return 0.02 + 0.9 * (1 - math.exp(-x / 2)) + rng.gauss(0, 0.005)


def run(method: str, seed: int, trials: int, batch: int) -> list[float]:
    """The best error after each trial, configurations asked ``batch`` at a time."""
    settings = search.Settings(
        parameters=SPACE, method=method, goal="minimize", max_trials=trials, seed=seed
    )
    noise = random.Random(seed)
    observed: list[search.Observed] = []
    best, curve = math.inf, []
    while len(observed) < trials:
        for params in search.suggest(settings, observed, min(batch, trials - len(observed))):
            value = val_error(params, noise)
            observed.append(search.Observed(len(observed), params, "complete", value))
            best = min(best, value)
            curve.append(best)
    return curve


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    started = time.perf_counter()
    curves = {
        m: [run(m, seed, args.trials, args.batch) for seed in range(args.seeds)]
        for m in ("random", "bayesian")
    }
    finals = {m: [c[-1] for c in cs] for m, cs in curves.items()}
    median = {m: statistics.median(v) for m, v in finals.items()}
    wins = sum(b < r for b, r in zip(finals["bayesian"], finals["random"], strict=True))
    print(f"{args.trials} trials, {args.batch} at a time, {args.seeds} seeds (lower is better)")
    for m in ("random", "bayesian"):
        print(
            f"  {m:9s} median best error {median[m]:.4f}  (per seed: "
            + " ".join(f"{v:.3f}" for v in finals[m])
            + ")"
        )
    print(f"ratio random / bayesian: {median['random'] / median['bayesian']:.2f}x")
    print(f"bayesian ends lower in {wins} of {args.seeds} seeds")
    reached = [
        next((i + 1 for i, v in enumerate(c) if v <= median["bayesian"]), None)
        for c in curves["random"]
    ]
    hit = [r for r in reached if r is not None]
    print(
        f"random search reaches bayesian's median within {args.trials} trials in "
        f"{len(hit)} of {args.seeds} seeds"
    )
    print(f"({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
