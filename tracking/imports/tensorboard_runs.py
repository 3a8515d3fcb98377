"""TensorBoard runs: a folder's ``events.out.tfevents.*`` files, read with TensorBoard's
own loader (``EventFileLoader``, which also turns old ``simple_value`` scalars into
today's tensors). A run is a folder of event files, as TensorBoard shows it; its scalars
become series (tag, step, wall time), its hyperparameters (the HParams plugin's session
start) parameters. A truncated or corrupt record ends the file where TensorBoard itself
stops reading it; a record that is not an event makes the run Unreadable."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from tracking.imports.source import Point, SourceRun, Unreadable, finite, series_name, step_of

PREFIX = "events.out.tfevents."


def is_event_file(path: Path) -> bool:
    return path.name.startswith(PREFIX)


class TensorBoardRun(SourceRun):
    def __init__(self, folder: Path, files: list[Path], name: str):
        names = sorted(f.name for f in files)
        digest = hashlib.sha256("\n".join(names).encode()).hexdigest()[:32]
        super().__init__(source="tensorboard", run_id=digest, origin=str(folder)[-1000:])
        self.name = name[-100:]
        self._files = sorted(files, key=lambda f: f.name)

    def points(self) -> Iterator[Point]:
        from google.protobuf.message import DecodeError  # noqa: PLC0415
        from tensorboard.backend.event_processing.event_file_loader import (  # noqa: PLC0415
            EventFileLoader,
        )

        first = last = None
        for path in self._files:
            scalar: dict[str, bool] = {}
            try:
                for event in EventFileLoader(str(path)).Load():
                    first = event.wall_time if first is None else min(first, event.wall_time)
                    last = event.wall_time if last is None else max(last, event.wall_time)
                    for value in event.summary.value:
                        yield from self._value(event, value, scalar)
            except DecodeError:
                raise Unreadable(
                    f"{path.name} holds a record that is not a TensorBoard event."
                ) from None
        if first is None:
            raise Unreadable(
                "no TensorBoard event could be read from its event files (cut short or corrupt "
                "from their first record)."
            )
        self.started, self.ended = first, last

    def _value(self, event, value, scalar: dict[str, bool]) -> Iterator[Point]:
        from tensorboard.util import tensor_util  # noqa: PLC0415

        plugin = value.metadata.plugin_data.plugin_name
        if plugin:
            scalar[value.tag] = plugin == "scalars"
            if plugin == "hparams":
                self._hparams(value.metadata.plugin_data.content)
        if not scalar.get(value.tag) or not value.HasField("tensor"):
            return
        # A scalar's shape has one element. Anything else is refused before a tensor is
        # made: make_ndarray allocates the whole declared shape (200 bytes can declare
        # gigabytes), whatever the file really holds.
        dims = [dim.size for dim in value.tensor.tensor_shape.dim]
        if any(size != 1 for size in dims):
            raise Unreadable(
                f"a scalar of {value.tag[:100]!r} at step {event.step} declares the shape "
                f"{dims[:8]}, not one value: not a scalar TensorBoard wrote."
            )
        try:
            array = tensor_util.make_ndarray(value.tensor)
        except (ValueError, TypeError):
            return
        if array.size != 1:
            return
        number = finite(array.item())
        if number is not None:
            yield series_name(value.tag), False, step_of(event.step), event.wall_time, number

    def _hparams(self, content: bytes) -> None:
        from google.protobuf.message import DecodeError  # noqa: PLC0415
        from tensorboard.plugins.hparams import plugin_data_pb2  # noqa: PLC0415

        try:
            data = plugin_data_pb2.HParamsPluginData.FromString(content)
        except DecodeError:
            return
        for name, value in data.session_start_info.hparams.items():
            kind = value.WhichOneof("kind")
            if kind in ("number_value", "string_value", "bool_value"):
                self.keep_param(name, getattr(value, kind))


def runs(root: Path, event_files: list[Path]) -> Iterator[TensorBoardRun]:
    """One run per folder holding event files, named by its path under ``root``."""
    folders: dict[Path, list[Path]] = {}
    for path in event_files:
        folders.setdefault(path.parent, []).append(path)
    for folder, files in sorted(folders.items()):
        relative = folder.relative_to(root) if folder != root else Path(root.name)
        yield TensorBoardRun(folder, files, str(relative))
