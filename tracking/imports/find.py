"""Which runs a path holds: MLflow ``mlruns`` stores (a folder holding MLflow's
``0/meta.yaml`` or ``.trash``, or named ``mlruns`` with an experiment in it), ``mlflow.db`` files, W&B ``run-*.wandb``
files and TensorBoard event files (outside an MLflow store), after tree.py has checked
every entry. Stores MLflow's client opens are first copied, their checked files only,
into a temporary folder, so a link or a FIFO put there meanwhile is never read."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

from tracking.imports import mlflow_runs, tensorboard_runs, wandb_runs
from tracking.imports.source import SourceRun, Unreadable
from tracking.imports.tree import Tree, copy_clean, copy_file, scan

SQLITE = b"SQLite format 3\x00"


def _is_store(tree: Tree, folder: Path, experiments: set[Path]) -> bool:
    """MLflow's file store: its ``0/meta.yaml`` or ``.trash``, or named ``mlruns`` with an
    experiment's ``meta.yaml`` in it (a folder merely named so, holding the store, is not)."""
    return (
        folder / "0" / "meta.yaml" in tree.files
        or folder / ".trash" in tree.dirs
        or (folder.name == "mlruns" and folder in experiments)
    )


def _is_sqlite(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(len(SQLITE)) == SQLITE


def runs(root: Path) -> Iterator[SourceRun | Unreadable | Skipped]:
    """Every run under ``root`` (a folder or a file), or an Unreadable for each part that
    cannot be read; an entry tree.py refused outside any run is a Skipped."""
    tree = scan(root)
    # Folders two levels above a meta.yaml: where an experiment's would sit in a store.
    experiments = {p.parent.parent for p in tree.files if p.name == "meta.yaml"}
    stores = sorted(d for d in tree.dirs if _is_store(tree, d, experiments))
    stores = [s for s in stores if not any(o in s.parents for o in stores)]

    def in_store(path: Path) -> bool:
        return any(s in path.parents for s in stores)

    for store in stores:
        yield from _file_store(tree, store)
    found = [p for p in tree.files if not in_store(p)]
    for path in sorted(found):
        if path.suffix == ".db" and _is_sqlite(path):
            yield from _sqlite(tree, path)
    for path in sorted(p for p in found if p.suffix == ".wandb" and p.name.startswith("run-")):
        yield wandb_runs.WandbRun(path, tree.files[path])
    events = [p for p in found if tensorboard_runs.is_event_file(p)]
    yield from tensorboard_runs.runs(root if root in tree.dirs else root.parent, events)
    for path, why in tree.problems.items():
        if not in_store(path):
            yield Unreadable(why) if _looks_like_run(path) else Skipped(why)


class Skipped(str):
    """An entry left unread that is no run's (a W&B folder's ``latest-run`` link)."""


def _looks_like_run(path: Path) -> bool:
    return path.name.endswith((".wandb", ".db")) or tensorboard_runs.is_event_file(path)


def _file_store(tree: Tree, store: Path) -> Iterator[SourceRun | Unreadable]:
    refused = mlflow_runs.check_file_store(tree, store)
    yield from (Unreadable(why) for why in refused.values())
    with tempfile.TemporaryDirectory(prefix="portal-import-") as tmp:
        copy = Path(tmp) / "mlruns"
        copy.mkdir()
        copy_clean(tree, store, copy, set(refused))
        yield from mlflow_runs.runs(copy.as_uri(), origin=str(store)[-1000:])


def _sqlite(tree: Tree, path: Path) -> Iterator[SourceRun | Unreadable]:
    with tempfile.TemporaryDirectory(prefix="portal-import-") as tmp:
        copy = Path(tmp) / "mlflow.db"
        copy_file(path, tree.files[path], copy)
        yield from mlflow_runs.runs(f"sqlite:///{copy}", origin=str(path)[-1000:])
