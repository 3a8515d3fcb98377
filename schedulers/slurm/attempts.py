"""``sacct --json -D -X`` -> each run (attempt) of each job, with what it held. Pure: tests
feed captured output. ``-D`` keeps the records of requeued runs; Slurm writes them in the
order they ran and gives no restart number, so the order is the attempt number."""

from __future__ import annotations

import logging
from datetime import datetime

from schedulers.seam import Attempt, JobKey
from schedulers.slurm.arrays import sacct_ids
from schedulers.slurm.json_fields import _epoch, _load, _number, _text
from schedulers.slurm.parsers import comment_agrees, sacct_comment, sacct_owner

log = logging.getLogger(__name__)

# More runs than this of one job are not read (a chained run has at most MAX_ATTEMPTS).
MAX_ATTEMPTS_READ = 200


def _tres(value) -> tuple[int, int]:
    """(GPUs, CPUs) of an AllocTRES list: ``[{"type": "gres", "name": "gpu", "count": 2}, ...]``.
    Typed GPUs ("gpu:a100") count only where the untyped total is missing."""
    gpus = typed = cpus = 0
    untyped_seen = False
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        kind, name, count = (
            _text(item.get("type")),
            _text(item.get("name")),
            _number(item.get("count")),
        )
        if count is None or count < 0:
            continue
        if kind == "cpu":
            cpus = count
        elif kind == "gres" and name == "gpu":
            gpus, untyped_seen = count, True
        elif kind == "gres" and name.startswith("gpu:"):
            typed += count
    return (gpus if untyped_seen else typed), cpus


def parse_attempts(
    output: str, username: str, expected: dict[JobKey, str]
) -> dict[JobKey, list[Attempt]]:
    """The runs of the jobs in ``expected`` ({(scheduler id, job name): comment, as
    parsers.match_jobs() takes}), oldest first. A record counts only under its job's id
    and name (two jobs holding one reissued id each get their own runs) and
    ``username``; others are ignored."""
    return parse_attempts_of_owners(output, {username: expected}).get(username, {})


def parse_attempts_of_owners(
    output: str, expected: dict[str, dict[JobKey, str]]
) -> dict[str, dict[JobKey, list[Attempt]]]:
    """parse_attempts() for several owners at once ({owner: {key: comment}}), the answer
    read once: a record counts under its owner's expected id and name only (a record with
    no owner, for whoever expects that id under that name)."""
    found: dict[str, dict[JobKey, list[tuple[tuple, Attempt]]]] = {o: {} for o in expected}
    for entry in _load(output, "sacct"):
        try:
            if not isinstance(entry, dict):
                continue
            owner = sacct_owner(entry)
            owners = [owner] if owner else list(expected)
            if owner and owner not in expected:
                continue
            job_id = _number(entry.get("job_id"))
            if job_id is None:
                continue
            times = t if isinstance(t := entry.get("time"), dict) else {}
            start = _epoch(times.get("start"))
            if start is None:  # never ran (a pending array's bitmap record, a cancelled job)
                continue
            state = entry.get("state")
            state_text = _text(state.get("current")) if isinstance(state, dict) else _text(state)
            tres = entry.get("tres")
            allocated = tres.get("allocated") if isinstance(tres, dict) else None
            gpus, cpus = _tres(allocated)
            elapsed = _number(times.get("elapsed")) or 0
            attempt = Attempt(
                scheduler_state=state_text[:32],
                node=_text(entry.get("nodes"))[:4000].replace("None assigned", ""),
                started_at=start,
                ended_at=_epoch(times.get("end")),
                elapsed_seconds=max(0, elapsed),
                gpus=gpus,
                cpus=cpus,
                account=_text(entry.get("account"))[:64],
            )
            order = (_number(times.get("submission")) or 0, start)
            name, comment = _text(entry.get("name")), sacct_comment(entry)
            for scheduler_id in sacct_ids(entry, job_id):
                key = JobKey(scheduler_id, name)
                for who in owners:
                    if not name or key not in expected[who]:
                        continue
                    if not comment_agrees(comment, expected[who][key]):
                        continue
                    runs = found[who].setdefault(key, [])
                    if len(runs) < MAX_ATTEMPTS_READ:
                        runs.append((order, attempt))
        except (ValueError, TypeError) as exc:
            log.warning("sacct -D: skipped a record (%s)", exc)
    return {
        who: {k: [a for _, a in sorted(runs, key=_by_order)] for k, runs in mine.items()}
        for who, mine in found.items()
    }


def _by_order(item: tuple[tuple, Attempt]) -> tuple[int, datetime]:
    return item[0]
