"""Slurm's array task lists: which scheduler ids (``<array>_<task>``) one squeue or sacct
record stands for (a pending array's record stands for every task still in it), and the
tasks an ended array's own record settles. Pure: tests feed captured values."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from schedulers.slurm.json_fields import _number, _text

if TYPE_CHECKING:
    from schedulers.seam import JobKey
    from schedulers.slurm.status import SlurmJob

# At most this many tasks are read from one pending array record ("0-999%4"); Slurm's own
# MaxArraySize defaults to 1001.
MAX_ARRAY_TASKS = 100_000


def array_tasks(spec: str) -> list[int]:
    """Task ids of a pending array record's ``array_task_string``: '2-5%2' -> [2, 3, 4, 5],
    '1,3,8-12:2' -> [1, 3, 8, 10, 12]. A malformed spec raises ValueError; more than
    MAX_ARRAY_TASKS tasks too (a record is never read in part)."""
    spec = spec.split("%")[0].strip()
    tasks: list[int] = []
    for item in spec.split(","):
        match = re.fullmatch(r"(\d{1,9})(?:-(\d{1,9})(?::(\d{1,9}))?)?", item.strip())
        if not match:
            raise ValueError(f"unreadable array task list {spec[:80]!r}")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) else low
        step = int(match.group(3)) if match.group(3) else 1
        if high < low or step < 1 or len(tasks) + (high - low) // step + 1 > MAX_ARRAY_TASKS:
            raise ValueError(f"array task list {spec[:80]!r} out of bounds")
        tasks.extend(range(low, high + 1, step))
    return tasks


def squeue_ids(entry: dict, job_id: int) -> list[str]:
    """The scheduler ids one squeue record stands for: a job's own id, an array task's
    'ARRAY_TASK', or every task still pending in an array's one record."""
    array_id = _number(entry.get("array_job_id"))
    if not array_id:
        return [str(job_id)]
    task = _number(entry.get("array_task_id"))
    if task is not None:
        return [f"{array_id}_{task}"]
    spec = _text(entry.get("array_task_string"))
    if not spec:
        return [str(job_id)]
    return [f"{array_id}_{t}" for t in array_tasks(spec)]


def bitmap_tasks(value: str) -> list[int]:
    """Task ids of sacct's ``array.task`` bitmap ('0x1E' -> [1, 2, 3, 4]): the tasks an
    array's own record still stood for when it ended (pending tasks cancelled together)."""
    if not re.fullmatch(r"0x[0-9A-Fa-f]{1,25000}", value):
        raise ValueError(f"unreadable array task bitmap {value[:40]!r}")
    bits = int(value, 16)
    if bits.bit_length() > MAX_ARRAY_TASKS:
        raise ValueError("array task bitmap out of bounds")
    return [i for i in range(bits.bit_length()) if bits >> i & 1]


# An array's own record that ended without saying which tasks it still stood for.
REMAINDER = "_*"


def sacct_ids(entry: dict, job_id: int) -> list[str]:
    """The scheduler ids one sacct record stands for (see squeue_ids): a job, an array
    task, or the tasks of an array's own record, whose ``task`` is a bitmap. Without the
    bitmap (seen when tasks waiting behind the throttle were cancelled as the array's
    next task was being started) the record is ``<array>_*``: see remainder_tasks()."""
    array = a if isinstance(a := entry.get("array"), dict) else {}
    array_id = _number(array.get("job_id"))
    if not array_id:
        return [str(job_id)]
    task = _number(array.get("task_id"))
    if task is not None:
        return [f"{array_id}_{task}"]
    bitmap = _text(array.get("task"))
    if bitmap:
        return [f"{array_id}_{t}" for t in bitmap_tasks(bitmap)]
    return [f"{array_id}{REMAINDER}" if array_id == job_id else str(job_id)]


def remainder_tasks(
    statuses: list[SlurmJob], expected: dict[JobKey, str], settled: dict[JobKey, SlurmJob]
) -> dict[JobKey, SlurmJob]:
    """Tasks of ``expected`` ({(id, name): comment}, as parsers.match_jobs() takes) that
    accounting gave no record of their own, settled by their array's own record once that
    has ended: the tasks that never left it (a task that started has its own record, one
    still waiting is in squeue) ended with it. Only under the array's name (and comment),
    like match_jobs()."""
    found: dict[JobKey, SlurmJob] = {}
    for status in statuses:
        if not status.scheduler_id.endswith(REMAINDER) or not status.is_final:
            continue
        prefix = status.scheduler_id.removesuffix("*")
        for key, comment in expected.items():
            if (
                key.scheduler_id.startswith(prefix)
                and key not in settled
                and status.carries(key.name, comment)
            ):
                found[key] = replace(status, scheduler_id=key.scheduler_id)
    return found
