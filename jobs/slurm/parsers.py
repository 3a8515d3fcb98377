"""Pure functions from Slurm's output to data. No I/O here: tests feed captured output."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

# Separator for squeue/sacct fields: a character no job name or reason contains
# (Open OnDemand uses the same one).
FIELD_SEP = "\x1f"

# squeue -o fields, in order. %k is the comment (carries the portal job id).
SQUEUE_FIELDS = ("%i", "%T", "%r", "%N", "%S", "%e", "%j", "%k")
SQUEUE_FORMAT = FIELD_SEP.join(SQUEUE_FIELDS)

SACCT_FIELDS = ("JobIDRaw", "State", "ExitCode", "Reason", "NodeList", "Start", "End", "JobName")

# Every Slurm job state, mapped onto the portal's vocabulary.
STATE_MAP = {
    "PENDING": "pending",
    "CONFIGURING": "pending",
    "REQUEUED": "pending",
    "REQUEUE_FED": "pending",
    "REQUEUE_HOLD": "pending",
    "SUSPENDED": "pending",  # not running now; the reason says why
    "RESV_DEL_HOLD": "pending",
    "RUNNING": "running",
    "RESIZING": "running",
    "SIGNALING": "running",
    "STOPPED": "running",
    "COMPLETING": "completing",
    "STAGE_OUT": "completing",
    "COMPLETED": "completed",
    "FAILED": "failed",
    "NODE_FAIL": "failed",
    "BOOT_FAIL": "failed",
    "OUT_OF_MEMORY": "failed",
    "PREEMPTED": "failed",
    "SPECIAL_EXIT": "failed",
    "REVOKED": "cancelled",
    "CANCELLED": "cancelled",
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
}

# Why a job ended in a portal state that does not say it by itself.
STATE_MESSAGES = {
    "NODE_FAIL": "The compute node failed while the job ran.",
    "BOOT_FAIL": "The compute node failed to boot for the job.",
    "OUT_OF_MEMORY": "The job ran out of memory; ask for more memory.",
    "PREEMPTED": "The job was preempted by a higher-priority job.",
    "DEADLINE": "The job reached its deadline.",
    "SUSPENDED": "Suspended by the scheduler.",
    "REVOKED": "The job was revoked (it ran on another cluster of a federation).",
}

# Pending reasons in plain words.
REASON_TEXT = {
    "Resources": "waiting for free resources (a free GPU or node)",
    "Priority": "waiting behind higher-priority jobs",
    "Dependency": "waiting for another job to finish",
    "DependencyNeverSatisfied": "its dependency can never be satisfied",
    "BeginTime": "waiting for its start time",
    "JobHeldUser": "held by you",
    "JobHeldAdmin": "held by an administrator",
    "ReqNodeNotAvail": "the requested nodes are not available (maintenance?)",
    "PartitionDown": "the partition is down",
    "PartitionInactive": "the partition is inactive",
    "PartitionTimeLimit": "the time limit exceeds the partition's limit",
    "PartitionNodeLimit": "the request exceeds the partition's node limit",
    "QOSMaxGRESPerUser": "you are at your GPU limit; waiting for your other jobs",
    "QOSMaxCpuPerUserLimit": "you are at your CPU limit; waiting for your other jobs",
    "QOSMaxJobsPerUserLimit": "you are at your job limit; waiting for your other jobs",
    "AssocGrpGRES": "your group is at its GPU limit",
    "AssocGrpCpuLimit": "your group is at its CPU limit",
    "AssociationJobLimit": "your account is at its job limit",
    "Reservation": "waiting for its reservation",
    "NodeDown": "a required node is down",
    "BadConstraints": "no node satisfies the requested constraints",
    "InvalidAccount": "the account is not valid",
    "InvalidQOS": "the QOS is not valid",
    "launch failed requeued held": "launch failed; the job was requeued and held",
}


def reason_text(reason: str) -> str:
    """A pending reason in plain words ('' for none)."""
    if not reason or reason in {"None", "(null)"}:
        return ""
    return REASON_TEXT.get(reason, reason)


@dataclass(frozen=True)
class JobStatus:
    """One job as the scheduler reports it."""

    scheduler_id: str
    slurm_state: str
    reason: str = ""
    node: str = ""
    start: datetime | None = None
    end: datetime | None = None
    name: str = ""
    comment: str = ""
    exit_code: int | None = None
    signal: int | None = None
    restarts: int | None = None

    @property
    def state(self) -> str:
        """The portal's state for this job."""
        return map_state(self.slurm_state)

    @property
    def is_final(self) -> bool:
        return self.state in {"completed", "failed", "cancelled", "timeout"}


def map_state(slurm_state: str) -> str:
    """'CANCELLED by 1001' -> 'cancelled'. Unknown states raise ValueError."""
    key = slurm_state.split()[0].rstrip("+") if slurm_state else ""
    try:
        return STATE_MAP[key]
    except KeyError:
        raise ValueError(f"unknown Slurm job state {slurm_state!r}") from None


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


def _none_if_null(value: str) -> str:
    value = value.strip()
    return "" if value in {"(null)", "None", "N/A", "n/a"} else value


def _rows(output: str, width: int, command: str):
    """Non-blank lines split on FIELD_SEP, each exactly ``width`` fields."""
    for line in output.splitlines():
        if not line.strip():
            continue
        fields = line.split(FIELD_SEP)
        if len(fields) != width:
            raise ValueError(f"unexpected {command} line (want {width} fields): {line!r}")
        yield fields


def _status(job_id, state, reason, nodes, start, end, name, **extra) -> JobStatus:
    """The fields squeue, scontrol and sacct all report, as Slurm prints them."""
    return JobStatus(
        scheduler_id=job_id,
        slurm_state=state,
        reason=_none_if_null(reason),
        node=_none_if_null(nodes),
        start=parse_time(start),
        end=parse_time(end),
        name=name,
        **extra,
    )


def parse_squeue(output: str) -> dict[str, JobStatus]:
    """Output of ``squeue -h -o SQUEUE_FORMAT`` -> {scheduler id: JobStatus}."""
    jobs = {}
    for fields in _rows(output, len(SQUEUE_FIELDS), "squeue"):
        job_id, state, reason, nodes, start, end, name, comment = fields
        jobs[job_id] = _status(
            job_id, state, reason, nodes, start, end, name, comment=_none_if_null(comment)
        )
    return jobs


_KV = re.compile(r"(\w+)=(\S*)")


def parse_scontrol_jobs(output: str) -> dict[str, JobStatus]:
    """Output of ``scontrol show job -o`` (one job per line) -> {id: JobStatus}."""
    jobs = {}
    for line in output.splitlines():
        if "JobId=" not in line:
            continue
        fields = dict(_KV.findall(line))
        # Comment and name may contain spaces; take them up to the next Key=.
        exit_code, signal = parse_exit_code(fields.get("ExitCode", ""))
        job_id = fields["JobId"]
        jobs[job_id] = _status(
            job_id,
            fields.get("JobState", ""),
            fields.get("Reason", ""),
            fields.get("NodeList", ""),
            fields.get("StartTime", ""),
            fields.get("EndTime", ""),
            _field_with_spaces(line, "JobName"),
            comment=_none_if_null(_field_with_spaces(line, "Comment")),
            exit_code=exit_code,
            signal=signal,
            restarts=int(fields["Restarts"]) if fields.get("Restarts", "").isdigit() else None,
        )
    return jobs


def _field_with_spaces(line: str, key: str) -> str:
    match = re.search(rf"(?:^| ){key}=(.*?)(?= [A-Za-z/:]+=|$)", line)
    return match.group(1) if match else ""


def parse_sacct(output: str) -> dict[str, JobStatus]:
    """Output of ``sacct -n -P -X --delimiter=FIELD_SEP -o SACCT_FIELDS`` -> {id: JobStatus}."""
    jobs = {}
    for fields in _rows(output, len(SACCT_FIELDS), "sacct"):
        job_id, state, exit_code, reason, nodes, start, end, name = fields
        code, signal = parse_exit_code(exit_code)
        jobs[job_id] = _status(
            job_id, state, reason, nodes, start, end, name, exit_code=code, signal=signal
        )
    return jobs


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
