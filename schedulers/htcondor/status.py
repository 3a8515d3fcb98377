"""The HTCondor adapter's translation: JobStatus, hold and remove reasons into the portal's
neutral status (schedulers/seam.py). This is where an HTCondor state is mapped."""

from __future__ import annotations

from common.choices import State
from schedulers.htcondor import parsers as p
from schedulers.seam import REASON_MAX_LENGTH, Status

# A held job's pending reason: HTCondor's HoldReason in its own words after this.
HELD_PREFIX = "held: "

# The submit description's time limit (schedulers/htcondor/submit.py) removes a job with this
# expression; its RemoveReason quotes it.
TIME_LIMIT_ATTRIBUTE = "PortalTimeLimit"


# HoldReasonCode in words, for a hold without a reason text (HTCondor drops a reason it
# cannot store, one with a line break, say).
HOLD_CODES = {
    1: "held by its owner or an administrator (condor_hold)",
    3: "held by a policy expression of the job or the pool",
    6: "HTCondor could not start its executable",
    7: "HTCondor could not open its output or error file",
    13: "HTCondor could not transfer its input files",
    12: "HTCondor could not transfer its output files",
    34: "it used more memory than it asked for",
    21: "held because of a problem with its job ad",
}


def held_reason(job: p.CondorJob) -> str:
    """'held: <HTCondor's reason>' (what the page shows and Job.is_held recognises)."""
    reason = job.hold_reason or HOLD_CODES.get(
        job.hold_code or 0, f"held by HTCondor (hold code {job.hold_code})"
    )
    return f"{HELD_PREFIX}{reason}"[:REASON_MAX_LENGTH]


def pending_reason(job: p.CondorJob) -> str:
    if job.status == p.HELD:
        return held_reason(job)
    if job.status == p.SUSPENDED:
        return "suspended by HTCondor (its machine is busy with other work)"
    if job.starts:
        return "waiting to run again (it was evicted or its machine went away)"
    if job.unmatched:
        return (
            "no machine in the pool matches its requirements now (GPUs, memory or "
            "CPUs); it waits until one does"
        )
    return "waiting for a matching machine"


def to_status(job: p.CondorJob) -> Status:
    """What HTCondor says of a job, in the portal's words. Unknown states raise ValueError."""
    code, signal, message = None, None, ""
    if job.status in (p.IDLE, p.HELD, p.SUSPENDED):
        state = State.PENDING
    elif job.status == p.RUNNING:
        state = State.RUNNING
    elif job.status == p.TRANSFERRING_OUTPUT:
        state = State.COMPLETING
    elif job.status == p.REMOVED:
        reason = job.remove_reason
        if reason.startswith("The job attribute PeriodicRemove") and (
            TIME_LIMIT_ATTRIBUTE in reason
        ):
            state, message = State.TIMEOUT, "It reached its time limit."
        else:
            state = State.CANCELLED
    elif job.status == p.COMPLETED:
        if job.exit_by_signal:
            state, code, signal = State.FAILED, None, job.exit_signal
            message = f"Killed by signal {job.exit_signal}." if job.exit_signal else ""
        else:
            code = job.exit_code
            state = State.COMPLETED if code == 0 else State.FAILED
    else:
        raise ValueError(f"unknown HTCondor JobStatus {job.status!r}")
    pending = state == State.PENDING
    return Status(
        state=state,
        reason=pending_reason(job) if pending else "",
        message=message,
        node="" if pending else job.node,
        started=job.started_at is not None,
        exit_code=code,
        signal=signal,
        attempt=max(job.starts - 1, 0),
        held=job.status == p.HELD,
    )
