"""W&B offline runs (``wandb/offline-run-*/run-<id>.wandb``): every record decoded with
W&B's own protobuf messages (``wandb.proto.wandb_internal_pb2.Record``). W&B 0.31 ships
no Python reader of the file itself (its Go core reads it), so ``records()`` reads the
framing W&B writes: LevelDB's log format, a 7-byte ``:W&B`` header, then 32 KiB blocks
of records each with its CRC-32 (of its type byte and data), length and type (whole,
first, middle or last part). A bad checksum or a record cut short ends the file there,
as W&B's own sync does; a header that is not W&B's makes the run Unreadable.

Kept: the history's numbers by step (``_timestamp`` their wall time), the config as
parameters, the run's name, project, group, tags and notes as tags, system metrics
(``stats``) as the job's system series, and the exit code as its final state."""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from tracking.imports.source import Point, SourceRun, Unreadable, finite, series_name

HEADER = struct.Struct("<4sHB")
MAGIC = (b":W&B", 0xBEE1, 0)
RECORD = struct.Struct("<IHB")
BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
MAX_RECORD = 64 * 1024 * 1024  # one record's parts together
RUN_FOLDER = re.compile(r"^(offline-)?run-[0-9]{8}_[0-9]{6}-[A-Za-z0-9]{1,64}\Z")
MAX_VALUE_JSON = 10_000  # characters of a value read as JSON; longer is kept as text


def records(path: Path, size: int) -> Iterator[bytes]:
    """Each whole record's bytes in the file (of ``size`` bytes, as scanned)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        head = f.read(HEADER.size)
        if len(head) < HEADER.size or HEADER.unpack(head) != MAGIC:
            raise Unreadable(f"{path.name} is not a W&B run file (its header is not W&B's).")
        offset = HEADER.size
        parts: list[bytes] | None = None
        held = 0
        while offset + RECORD.size <= size:
            room = BLOCK - offset % BLOCK
            if room < RECORD.size:  # a block's tail too short for a header is padding
                f.seek(room, 1)
                offset += room
                continue
            checksum, length, kind = RECORD.unpack(f.read(RECORD.size))
            offset += RECORD.size
            if length > room - RECORD.size or kind not in (FULL, FIRST, MIDDLE, LAST):
                return  # padding, or not a record: the file ends here for a reader
            data = f.read(length)
            offset += length
            if len(data) < length or zlib.crc32(bytes([kind]) + data) != checksum:
                return
            if kind == FULL:
                parts, held = None, 0
                yield data
            elif kind == FIRST:
                parts, held = [data], length
            elif parts is not None:
                parts.append(data)
                held += length
                if held > MAX_RECORD:
                    raise Unreadable(
                        f"{path.name} holds a record larger than {MAX_RECORD:,} bytes."
                    )
                if kind == LAST:
                    yield b"".join(parts)
                    parts, held = None, 0


def _value(text: str) -> object:
    if len(text) > MAX_VALUE_JSON:
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _key(item) -> str:
    return ".".join(item.nested_key) if item.nested_key else item.key


class WandbRun(SourceRun):
    def __init__(self, path: Path, size: int):
        # Its folder's name (offline-run-<date>_<time>-<id>) or else run-<id>.wandb's id: the
        # key, known before the file is read.
        folder = path.parent.name
        run_id = folder if RUN_FOLDER.match(folder) else path.stem.removeprefix("run-")
        super().__init__(source="wandb", run_id=run_id, origin=str(path)[-1000:])
        self._path, self._size = path, size
        self.state = "cancelled"  # until an exit record says how it ended

    def points(self) -> Iterator[Point]:
        from google.protobuf.message import DecodeError  # noqa: PLC0415
        from wandb.proto import wandb_internal_pb2  # noqa: PLC0415 - W&B only when importing

        for data in records(self._path, self._size):
            try:
                record = wandb_internal_pb2.Record.FromString(data)
            except DecodeError:
                raise Unreadable(f"{self._path.name} holds a record W&B cannot decode.") from None
            kind = record.WhichOneof("record_type")
            if kind == "history":
                yield from self._history(record.history)
            elif kind == "stats":
                yield from self._stats(record.stats)
            elif kind == "config":
                self._config(record.config.update)
            elif kind == "run":
                self._run(record.run)
            elif kind == "exit":
                self.state = "completed" if record.exit.exit_code == 0 else "failed"

    def _run(self, run) -> None:
        if run.start_time.seconds:
            self.started = run.start_time.seconds + run.start_time.nanos / 1e9
        self.name = (run.display_name or run.run_id)[:100]
        self._config(run.config.update)
        for name, value in (
            ("wandb.project", run.project),
            ("wandb.entity", run.entity),
            ("wandb.group", run.run_group),
            ("wandb.job_type", run.job_type),
            ("wandb.notes", run.notes),
            ("wandb.tags", ",".join(run.tags)),
        ):
            if value:
                self.keep_tag(name, value)

    def _config(self, items) -> None:
        for item in items:
            key = _key(item)
            if not key.startswith("_"):  # W&B's own (_wandb: its telemetry)
                self.keep_param(key, _value(item.value_json))

    def _history(self, history) -> Iterator[Point]:
        values: dict[str, object] = {}
        for item in history.item:
            values[_key(item)] = _value(item.value_json)
        step = history.step.num if history.HasField("step") else values.get("_step", 0)
        when = finite(values.get("_timestamp")) or 0.0
        if when:
            self.ended = max(self.ended or 0.0, when)
        step = step if isinstance(step, int) and 0 <= step < 2**62 else 0
        for key, raw in values.items():
            if key.startswith("_"):
                continue
            number = finite(raw)
            if number is not None:
                yield series_name(key), False, step, when, number

    def _stats(self, stats) -> Iterator[Point]:
        when = stats.timestamp.seconds + stats.timestamp.nanos / 1e9
        step = int(when)  # system metrics have no step: their time in seconds stands for it
        for item in stats.item:
            number = finite(_value(item.value_json))
            if number is not None:
                yield series_name(item.key), True, step, when, number
