"""Runs logged by MLflow's, W&B's and TensorBoard's own clients, for the importers' tests
and bench/imports.py: ``python -m devtools.run_samples OUT --mlflow N --wandb N
--tensorboard N --steps S``. Each run's values are ``value(kind, run, step)``, so a reader
of the import checks every point against what was logged without keeping a copy.

OUT/mlruns (MLflow's file store), OUT/mlflow.db (``--sqlite``), OUT/wandb/offline-run-*
(W&B's offline mode) and OUT/tensorboard/run-<n>/ (TensorBoard's event file writer)."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

METRICS = ("loss", "accuracy")


def value(metric: str, run: int, step: int) -> float:
    """What run ``run`` logged for ``metric`` at ``step`` (exact in a float32 too, for
    TensorBoard, which keeps scalars as float32: multiples of 1/1024 below 2^13)."""
    if metric == "loss":
        return ((run * 37 + step * 11) % 4096) / 1024
    return ((run * 13 + step * 7) % 1024) / 1024


def params(run: int) -> dict:
    return {"lr": [0.1, 0.01, 0.001][run % 3], "batch_size": 32 << (run % 3), "optimizer": "adam"}


def mlflow_runs(out: Path, n: int, steps: int, uri: str) -> None:
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("samples")
    now = int(time.time() * 1000)
    for run in range(n):
        started = client.create_run(experiment, run_name=f"mlflow-{run}", tags={"sample": "yes"})
        run_id = started.info.run_id
        metrics = [
            Metric(key, value(key, run, step), now + step, step)
            for step in range(steps)
            for key in METRICS
        ]
        for at in range(0, len(metrics), 1000):
            client.log_batch(
                run_id,
                metrics=metrics[at : at + 1000],
                params=[Param(k, str(v)) for k, v in params(run).items()] if at == 0 else [],
                tags=[RunTag("team", "vision")] if at == 0 else [],
            )
        client.set_terminated(run_id, "FINISHED" if run % 10 else "FAILED")


def wandb_runs(out: Path, n: int, steps: int) -> None:
    os.environ.update({"WANDB_MODE": "offline", "WANDB_SILENT": "true"})
    import wandb

    for run in range(n):
        logged = wandb.init(
            project="samples", dir=str(out), name=f"wandb-{run}", config=params(run), tags=["s"]
        )
        for step in range(steps):
            logged.log({key: value(key, run, step) for key in METRICS}, step=step)
        logged.finish(exit_code=0 if run % 10 else 1)


def tensorboard_runs(out: Path, n: int, steps: int) -> None:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    for run in range(n):
        writer = EventFileWriter(str(out / "tensorboard" / f"run-{run}"))
        for step in range(steps):
            values = [Summary.Value(tag=k, simple_value=value(k, run, step)) for k in METRICS]
            writer.add_event(Event(wall_time=time.time(), step=step, summary=Summary(value=values)))
        writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--mlflow", type=int, default=0)
    parser.add_argument("--sqlite", type=int, default=0, help="MLflow runs in OUT/mlflow.db")
    parser.add_argument("--server", help="with --mlflow: log to this tracking URI instead")
    parser.add_argument("--wandb", type=int, default=0)
    parser.add_argument("--tensorboard", type=int, default=0)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.mlflow:
        uri = args.server or (args.out / "mlruns").absolute().as_uri()
        mlflow_runs(args.out, args.mlflow, args.steps, uri)
    if args.sqlite:
        mlflow_runs(args.out, args.sqlite, args.steps, f"sqlite:///{args.out.absolute()}/mlflow.db")
    if args.wandb:
        wandb_runs(args.out, args.wandb, args.steps)
    if args.tensorboard:
        tensorboard_runs(args.out, args.tensorboard, args.steps)


if __name__ == "__main__":
    main()
