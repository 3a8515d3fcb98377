"""Pure functions from squeue, sacct and sbatch output to data (sinfo: sinfo.py; array task
lists: arrays.py). No I/O here: tests feed captured output."""

from __future__ import annotations

import logging
import re
from datetime import datetime

from schedulers.seam import JobKey
from schedulers.slurm.arrays import sacct_ids, squeue_ids
from schedulers.slurm.json_fields import _epoch, _json_state, _load, _none_if_null, _number, _text
from schedulers.slurm.status import SlurmJob, comment_agrees, map_state  # noqa: F401 - named here too

log = logging.getLogger(__name__)

# Separator for sacct's -P fields: free text (the job name) comes last and may hold it.
FIELD_SEP = "\x1f"

# sacct -o fields, in order. Only JobName is the user's text, so it is last: whatever it
# contains stays in that one field.
SACCT_FIELDS = (
    "JobID",  # an array task's is ARRAY_TASK ("1234_5"); others' is the plain id
    "User",
    "State",
    "ExitCode",
    "Reason",
    "NodeList",
    "Start",
    "End",
    "JobName",
)


# A scheduler id the portal stores: a job's number, or an array task's "ARRAY_TASK".
SCHEDULER_ID = re.compile(r"\d+(_\d+)?\Z")


def sacct_comment(entry: dict) -> str:
    """The job's comment in a ``sacct --json`` record: ``{"job": ...}`` (22.05 on; null
    unless the site stores comments), or plain text."""
    comment = entry.get("comment")
    return _text(comment.get("job")) if isinstance(comment, dict) else _text(comment)


def parse_time(value: str) -> datetime | None:
    """Slurm's ISO-like local time ('2026-11-21T11:48:36'); None for Unknown/N/A/None."""
    value = value.strip()
    if not value or value in {"Unknown", "N/A", "None", "(null)"}:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def parse_exit_code(value: str) -> tuple[int | None, int | None]:
    """'3:0' -> (3, 0); '0:15' -> (0, 15); '' -> (None, None)."""
    match = re.fullmatch(r"\s*(\d+):(\d+)\s*", value or "")
    if not match:
        return None, None
    return int(match.group(1)), int(match.group(2))


def _json_exit(value) -> tuple[int | None, int | None]:
    """squeue's exit_code: a raw wait status (22.05: 768 is exit 3, 9 is signal 9) or,
    from 23.02 on, {"return_code": N, "signal": {"id": N}}."""
    if isinstance(value, dict):
        code = _number(value.get("return_code"))
        signal = value.get("signal")
        sig = _number(signal.get("id")) if isinstance(signal, dict) else None
        return code, sig or 0
    raw = _number(value)
    if raw is None or raw < 0:
        return None, None
    if raw & 0x7F:
        return 0, raw & 0x7F
    return (raw >> 8) & 0xFF, 0


def parse_squeue_json(output: str, username: str | None) -> list[SlurmJob]:
    """``squeue --json`` -> the statuses of ``username``'s jobs (None: every user's, each
    with its owner in ``user``, for a sync that reads a whole cluster at once).

    Every field is read by its key from a JSON object, so nothing a user writes into a
    name, comment or path can move a field or add one. Slurm 22.05 ignores ``-u``/``-j``
    with ``--json`` and lists every user's jobs: the owner is checked here. A job entry
    that is not what it should be is logged and skipped; the others still count.
    """
    entries = _load(output, "squeue")
    positions = queue_positions(entries)
    statuses: list[SlurmJob] = []
    for entry in entries:
        try:
            if not isinstance(entry, dict):
                continue
            owner = _text(entry.get("user_name"))
            if not owner or (username is not None and owner != username):
                continue
            job_id = _number(entry.get("job_id"))
            if job_id is None:
                raise ValueError("no job_id")
            state = _json_state(entry.get("job_state"))
            map_state(state)  # an unknown state is skipped with the entry
            code, signal = _json_exit(entry.get("exit_code"))
            statuses.extend(
                SlurmJob(
                    scheduler_id=scheduler_id,
                    slurm_state=state,
                    reason=_none_if_null(_text(entry.get("state_reason"))),
                    node=_none_if_null(_text(entry.get("nodes"))),
                    start=_epoch(entry.get("start_time")),
                    end=_epoch(entry.get("end_time")),
                    name=_text(entry.get("name")),
                    comment=_text(entry.get("comment")),
                    exit_code=code,
                    signal=signal,
                    restarts=_number(entry.get("restart_cnt")),
                    user=owner,
                    queue_position=positions.get(job_id),
                    estimated_start=_epoch(entry.get("start_time")) if state == "PENDING" else None,
                    partition=_partition(entry),
                )
                for scheduler_id in squeue_ids(entry, job_id)
            )
        except ValueError as exc:
            log.warning("squeue: skipped a job entry (%s)", exc)
    return statuses


def _partition(entry: dict) -> str:
    """The partition a job waits in: the first, when it may run in several."""
    return _text(entry.get("partition")).split(",")[0]


def queue_positions(entries: list) -> dict[int, int]:
    """Job id -> place in its partition's queue (1 = next), from every user's pending jobs
    that ``squeue --json`` lists: higher priority first, then the older job. Held jobs
    (priority 0) wait at the back. A job pending in several partitions counts in its first."""
    queues: dict[str, list[tuple[int, int]]] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        job_id = _number(entry.get("job_id"))
        if job_id is None or _json_state(entry.get("job_state")) != "PENDING":
            continue
        partition = _partition(entry)
        queues.setdefault(partition, []).append((-(_number(entry.get("priority")) or 0), job_id))
    positions = {}
    for queue in queues.values():
        for place, (_, job_id) in enumerate(sorted(queue), start=1):
            positions[job_id] = place
    return positions


def sacct_owner(entry: dict) -> str:
    """The user of a ``sacct --json`` record: its ``user``, else its association's ('' if
    neither says)."""
    association = entry.get("association")
    return _text(entry.get("user")) or (
        _text(association.get("user")) if isinstance(association, dict) else ""
    )


def parse_sacct_json(output: str, username: str | None) -> list[SlurmJob]:
    """``sacct --json -X -j IDS`` -> statuses of ``username``'s jobs (None: every user's),
    every field by key.

    Slurm 22.05's JSON gets plain exit codes wrong (``exit 3`` reads as return code 0;
    signals are right), so exit codes are taken from ``sacct -P`` by exit_codes() and
    merged in by the caller; here they are left unknown unless a signal is reported.
    A job recorded before its user had an association has no user: the name check of
    match_jobs() is then the guard.
    """
    statuses: list[SlurmJob] = []
    for entry in _load(output, "sacct"):
        try:
            if not isinstance(entry, dict):
                continue
            owner = sacct_owner(entry)
            if owner and username is not None and owner != username:
                continue
            job_id = _number(entry.get("job_id"))
            state_info = entry.get("state")
            if not isinstance(state_info, dict):
                state_info = {}  # map_state("") then refuses the entry, as before
            state = _text(state_info.get("current"))
            if job_id is None:
                raise ValueError("no job_id")
            map_state(state)
            times = t if isinstance(t := entry.get("time"), dict) else {}
            ids = sacct_ids(entry, job_id)
            exit_info = entry.get("exit_code")
            signal = None
            if isinstance(exit_info, dict) and _text(exit_info.get("status")) == "SIGNALED":
                sig = exit_info.get("signal")
                signal = _number(sig.get("signal_id")) if isinstance(sig, dict) else None
            statuses.extend(
                SlurmJob(
                    scheduler_id=scheduler_id,
                    slurm_state=state,
                    reason=_none_if_null(_text(state_info.get("reason"))),
                    node=_none_if_null(_text(entry.get("nodes")).replace("None assigned", "")),
                    start=_epoch(times.get("start")),
                    end=_epoch(times.get("end")),
                    name=_text(entry.get("name")),
                    comment=sacct_comment(entry),
                    exit_code=0 if signal else None,
                    signal=signal,
                    user=owner or username or "",
                )
                for scheduler_id in ids
            )
        except ValueError as exc:
            log.warning("sacct: skipped a job entry (%s)", exc)
    return statuses


def exit_codes(
    output: str, username: str | None, settled: dict[JobKey, SlurmJob]
) -> dict[JobKey, tuple]:
    """Exit codes from ``sacct -P`` output for the jobs of ``settled`` (already read from
    JSON): an id's line counts only if it is the one line for that id and agrees with the
    JSON on name and state, so a newline in a job name cannot forge another job's code,
    and a job whose id was reissued never takes the other job's."""
    lines: dict[str, list[SlurmJob]] = {}
    for status in parse_sacct(output, username):
        lines.setdefault(status.scheduler_id, []).append(status)
    codes = {}
    for key, known in settled.items():
        found = lines.get(key.scheduler_id, [])
        if len(found) == 1 and (found[0].name, found[0].state) == (key.name, known.state):
            codes[key] = (found[0].exit_code, found[0].signal)
    return codes


def parse_sacct(output: str, username: str | None) -> list[SlurmJob]:
    """``sacct -n -P -X --delimiter=FIELD_SEP -o SACCT_FIELDS`` -> statuses of ``username``'s
    jobs (None: every user's). The job name is the last field and takes the rest of the line, separators and
    all; a line broken by a newline in a name has the wrong shape (or a foreign owner) and
    is skipped, so it can neither hide a job nor speak for another."""
    statuses = []
    width = len(SACCT_FIELDS)
    for line in output.splitlines():
        fields = line.split(FIELD_SEP, width - 1)
        if len(fields) != width:
            if line.strip():
                log.warning("sacct: skipped a line of %d fields", len(fields))
            continue
        job_id, user, state, exit_code, reason, nodes, start, end, name = fields
        if not SCHEDULER_ID.match(job_id) or (username is not None and user != username):
            continue
        try:
            map_state(state)
        except ValueError as exc:
            log.warning("sacct: skipped job %s (%s)", job_id, exc)
            continue
        code, signal = parse_exit_code(exit_code)
        statuses.append(
            SlurmJob(
                scheduler_id=job_id,
                slurm_state=state,
                reason=_none_if_null(reason),
                node=_none_if_null(nodes),
                start=parse_time(start),
                end=parse_time(end),
                name=name,
                exit_code=code,
                signal=signal,
                user=user,
            )
        )
    return statuses


def match_jobs(statuses: list[SlurmJob], expected: dict[JobKey, str]) -> dict[JobKey, SlurmJob]:
    """{key: status} for the jobs of ``expected`` ({(scheduler id, the portal's job name):
    its comment, "" if not checked}): a record counts for a job only under its id and its
    name (SlurmJob.carries), since ids are reissued after a controller crash, to another
    job of the same person even: two portal jobs holding one id each get the record with
    their own name, or none. A job reported twice is ambiguous and left out (a later copy
    never overrides an earlier one)."""
    found: dict[JobKey, SlurmJob] = {}
    ambiguous: set[JobKey] = set()
    for status in statuses:
        key = JobKey(status.scheduler_id, status.name)
        if key not in expected or not status.carries(key.name, expected[key]):
            continue
        if key in found:
            ambiguous.add(key)
        found[key] = status
    for key in ambiguous:
        log.warning("job id %s is reported twice under one name; ignored until it is not", key[0])
        del found[key]
    return found


def parse_sbatch(output: str) -> str:
    """``sbatch --parsable`` prints 'ID' or 'ID;cluster'."""
    first = output.strip().splitlines()[-1] if output.strip() else ""
    job_id = first.split(";")[0]
    if not job_id.isdigit():
        raise ValueError(f"sbatch printed no job id: {output!r}")
    return job_id


# Messages that mean the scheduler is unreachable or busy, not that the request is bad.
TRANSIENT_PATTERNS = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Slurm temporarily unable to accept job",
    "Zero Bytes were transmitted or received",
    "Connection refused",
    "Communication connection failure",
    "slurm_load_jobs error: Unable to contact",
    "Resource temporarily unavailable",
    "Slurmctld busy",
    "try again",
)


def is_transient(stderr: str) -> bool:
    text = stderr.lower()
    return any(p.lower() in text for p in TRANSIENT_PATTERNS)


def accounting_disabled(stderr: str) -> bool:
    return "accounting storage is disabled" in stderr.lower()
