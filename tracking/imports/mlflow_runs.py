"""MLflow runs, read with MLflow's own client (mlflow-skinny): a ``mlruns`` folder
(``file:`` store), an ``mlflow.db`` (``sqlite:``) or a tracking server (``http(s)://``).
What MLflow keeps of a run is kept: every metric's history with steps and timestamps,
parameters, tags, status and times; MLflow's system metrics (``system/…``) as the job's
system series. Deleted runs and experiments are left out.

The client reads what tree.py let through: before a ``file:`` store is opened its
``meta.yaml`` files are loaded with the portal's bounded YAML loader (no aliases, bounded
depth and size), since MLflow's reader would follow them whole."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from common.bounded_yaml import SpecError, load
from tracking.imports.source import Point, SourceRun, Unreadable, finite, series_name, step_of
from tracking.imports.tree import Tree

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

# MLflow's RunStatus numbers and names -> the portal's final states.
STATES = {"FINISHED": "completed", "FAILED": "failed", "KILLED": "cancelled"}
PAGE = 1000
MAX_META_BYTES = 64 * 1024


@contextmanager
def _client_settings():
    """MLflow's own settings for one read: a file store may be read (3.x refuses it
    unless asked), and a server gets short timeouts and no retries, so a dead one fails
    the import in seconds, not after minutes of backoff."""
    wanted = {
        "MLFLOW_ALLOW_FILE_STORE": "true",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    }
    before = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def check_file_store(tree: Tree, folder: Path) -> dict[Path, str]:
    """Run folders of a ``mlruns`` store that must not be read, with why: a problem
    under them (tree.py) or a ``meta.yaml`` the bounded loader refuses."""
    refused: dict[Path, str] = {}
    for path, size in tree.files.items():
        if path.name != "meta.yaml" or folder not in path.parents:
            continue
        if size > MAX_META_BYTES:
            refused[path.parent] = f"{path} is larger than {MAX_META_BYTES // 1024} KiB."
            continue
        try:
            load(path.read_text(errors="replace"))
        except SpecError as exc:
            refused[path.parent] = f"{path}: {exc}"
    for path, why in tree.problems.items():
        if folder in path.parents:
            # The problem's experiment or run folder: two levels under the store at most.
            parts = path.relative_to(folder).parts
            refused[folder.joinpath(*parts[:2])] = why
    return refused


class MlflowRun(SourceRun):
    def __init__(self, client: MlflowClient, run, origin: str):
        info, data = run.info, run.data
        super().__init__(source="mlflow", run_id=str(info.run_id), origin=origin)
        self._client = client
        self.name = str(info.run_name or data.tags.get("mlflow.runName") or "")[:100]
        self.state = STATES.get(str(info.status), "cancelled")
        self.started = info.start_time / 1000 if info.start_time else None
        self.ended = info.end_time / 1000 if info.end_time else None
        for key, value in data.params.items():
            self.keep_param(key, value)
        for key, value in data.tags.items():
            self.keep_tag(key, value)
        self._keys = sorted(data.metrics)

    def points(self) -> Iterator[Point]:
        with _client_settings():
            for key in self._keys:
                system = key.startswith("system/")
                name = series_name(key.removeprefix("system/") if system else key)
                for metric in self._client.get_metric_history(self.run_id, key):
                    value = finite(metric.value)
                    if value is not None:
                        yield name, system, step_of(metric.step), metric.timestamp / 1000, value


def runs(uri: str, origin: str) -> Iterator[SourceRun | Unreadable]:
    """Every active run of every active experiment behind ``uri``, or an Unreadable
    for what cannot be read."""
    from mlflow.entities import ViewType  # noqa: PLC0415 - MLflow only when importing
    from mlflow.exceptions import MlflowException  # noqa: PLC0415
    from mlflow.tracking import MlflowClient  # noqa: PLC0415

    with _client_settings():
        try:
            client = MlflowClient(tracking_uri=uri)
            experiments = list(
                _all(
                    lambda token: client.search_experiments(
                        view_type=ViewType.ACTIVE_ONLY, max_results=PAGE, page_token=token
                    )
                )
            )
        except (MlflowException, OSError, ValueError) as exc:
            yield Unreadable(f"{origin} cannot be read as an MLflow store: {str(exc)[:300]}")
            return
        for experiment in experiments:
            try:
                for run in _all(
                    lambda token, e=experiment: client.search_runs(
                        [e.experiment_id],
                        run_view_type=ViewType.ACTIVE_ONLY,
                        max_results=PAGE,
                        page_token=token,
                    )
                ):
                    yield MlflowRun(client, run, origin)
            except (MlflowException, OSError, ValueError) as exc:
                yield Unreadable(
                    f"Experiment {str(experiment.name)[:100]!r} of {origin} cannot be read: "
                    f"{str(exc)[:300]}"
                )


def _all(page) -> Iterator:
    token = None
    while True:
        found = page(token)
        yield from found
        token = found.token
        if not token:
            return
