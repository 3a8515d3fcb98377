"""Data-parallel demo: an MLP learns scikit-learn's bundled digits on every MPI rank, with
gradients averaged by an MPI allreduce after each step (the Horovod pattern).

Nothing is downloaded: the 8x8 digit images ship inside scikit-learn. Every rank starts
from the same weights, takes its share of each global batch, and applies the same
averaged gradient, so all ranks hold the same model and the result equals a
single-process run of the same code up to the order of floating-point sums. Each rank
logs its own loss, throughput and step time (one metrics file per rank); rank 0 also the
validation loss and accuracy.

    mpirun -np 4 train-digits-mpi --epochs 15 --check

``--check`` makes rank 0 train the same model again in one process afterwards and exit
1 if the two final accuracies differ by more than ``--tolerance`` (default 0.02).
``--slow-rank R --slow-delay S`` makes rank R sleep S extra seconds per step (a
straggler): the others then wait for it in every allreduce, which its ``compute_ms`` and
their ``allreduce_ms`` show.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import portal_metrics as pm
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

TOLERANCE = 0.02


class World:
    """The MPI communicator, or a world of one (``comm`` None)."""

    def __init__(self, comm=None) -> None:
        self.comm = comm
        self.rank = comm.Get_rank() if comm is not None else 0
        self.size = comm.Get_size() if comm is not None else 1

    def sum(self, array: np.ndarray) -> np.ndarray:
        if self.comm is None:
            return array
        from mpi4py import MPI

        out = np.empty_like(array)
        self.comm.Allreduce(array, out, op=MPI.SUM)
        return out


def data(seed: int):
    x, y = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(
        x, y, test_size=0.25, random_state=seed, stratify=y
    )
    scaler = StandardScaler().fit(x_train)
    return scaler.transform(x_train), scaler.transform(x_val), y_train, y_val


def init(seed: int, hidden: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        rng.normal(0, np.sqrt(2 / 64), (64, hidden)),
        np.zeros(hidden),
        rng.normal(0, np.sqrt(2 / hidden), (hidden, 10)),
        np.zeros(10),
    ]


def forward(params, x):
    w1, b1, w2, b2 = params
    h = np.maximum(x @ w1 + b1, 0)
    logits = h @ w2 + b2
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return h, p / p.sum(axis=1, keepdims=True)


def loss_and_grad_sums(params, x, y):
    """Summed (not averaged) cross-entropy and gradients over the rows of ``x``: sums from
    every rank add up to the global batch's."""
    w1, _, w2, _ = params
    h, p = forward(params, x)
    loss = -np.log(p[np.arange(len(y)), y] + 1e-12).sum()
    d = p.copy()
    d[np.arange(len(y)), y] -= 1
    g_w2, g_b2 = h.T @ d, d.sum(axis=0)
    dh = (d @ w2.T) * (h > 0)
    g_w1, g_b1 = x.T @ dh, dh.sum(axis=0)
    return loss, [g_w1, g_b1, g_w2, g_b2]


def evaluate(params, x, y) -> tuple[float, float]:
    _, p = forward(params, x)
    loss = float(-np.log(p[np.arange(len(y)), y] + 1e-12).mean())
    return loss, float((p.argmax(axis=1) == y).mean())


def train(world: World, args, log: bool = True) -> float:
    """Train; return the final validation accuracy (the same on every rank)."""
    x_train, x_val, y_train, y_val = data(args.seed)
    params = init(args.seed, args.hidden)
    rng = np.random.default_rng(args.seed)  # the same shuffles on every rank
    flat_sizes = [p.size for p in params]
    step = 0
    for epoch in range(args.epochs):
        order = rng.permutation(len(x_train))
        for start in range(0, len(order), args.batch_size):
            began = time.perf_counter()
            batch = order[start : start + args.batch_size]
            mine = batch[world.rank :: world.size]  # this rank's share of the global batch
            loss, grads = loss_and_grad_sums(params, x_train[mine], y_train[mine])
            if log and world.rank == args.slow_rank:
                time.sleep(args.slow_delay)
            computed = time.perf_counter()
            # One allreduce of everything: the summed loss, then every gradient.
            packed = np.concatenate([[loss, len(mine)], *(g.ravel() for g in grads)])
            total = world.sum(packed)
            global_loss, count = total[0], total[1]
            offset = 2
            for p, size in zip(params, flat_sizes, strict=True):
                p -= args.lr * total[offset : offset + size].reshape(p.shape) / count
                offset += size
            done = time.perf_counter()
            if log:
                pm.log(
                    step=step,
                    loss=global_loss / count,
                    rank_loss=loss / max(1, len(mine)),
                    samples_per_s=len(mine) / max(done - began, 1e-9),
                    compute_ms=1000 * (computed - began),
                    allreduce_ms=1000 * (done - computed),
                )
                if world.rank == 0 and step % args.eval_every == 0:
                    val_loss, val_acc = evaluate(params, x_val, y_val)
                    pm.log(step=step, val_loss=val_loss, val_accuracy=val_acc)
                time.sleep(args.delay)
            step += 1
        if log and world.rank == 0:
            _, acc = evaluate(params, x_val, y_val)
            print(f"epoch {epoch + 1}/{args.epochs}: val accuracy {acc:.4f}", flush=True)
    return evaluate(params, x_val, y_val)[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per step, to watch")
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--slow-delay", type=float, default=0.0)
    parser.add_argument("--check", action="store_true", help="compare with a 1-process run")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE)
    parser.add_argument("--single", action="store_true", help="no MPI: one process")
    args = parser.parse_args()

    comm = None
    if not args.single:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    world = World(comm)
    host = os.environ.get("PORTAL_NODE") or os.uname().nodename
    print(f"rank {world.rank} of {world.size} on {host}", flush=True)
    accuracy = train(world, args)
    pm.close()
    if world.rank != 0:
        return 0
    result = {"ranks": world.size, "accuracy": accuracy}
    status = 0
    if args.check:
        single = train(World(None), args, log=False)
        ok = abs(accuracy - single) <= args.tolerance
        result.update(single_process_accuracy=single, tolerance=args.tolerance, passed=ok)
        print(
            f"accuracy check: {'passed' if ok else 'FAILED'} ({world.size} ranks {accuracy:.4f}, "
            f"one process {single:.4f}, tolerance {args.tolerance})",
            flush=True,
        )
        status = 0 if ok else 1
    with open("digits_mpi_result.json", "w") as fh:
        json.dump(result, fh)
    print(f"final val accuracy {accuracy:.4f} on {world.size} ranks", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
