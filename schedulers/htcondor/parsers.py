"""Pure functions from HTCondor's output to data. No I/O here: tests feed captured output.

``condor_q -json`` and ``condor_history -json`` print a JSON list of job ClassAds with
the attributes asked for (``-attributes``, a fixed list): HTCondor escapes every string,
so a job's name, arguments or hold reason cannot change the structure. Attribute names
are case-insensitive in ClassAds (``RequestGpus`` comes back as ``RequestGPUs``): they are
compared lower-cased. What a job can write into its own ad (``condor_qedit``, a hold
reason) is bounded and shown as text only.

A job's owner can ``condor_qedit`` every attribute of its ad but Owner, ClusterId, ProcId,
MyType, TargetType, User and JobStatus (SYSTEM_IMMUTABLE_JOB_ATTRS; checked on HTCondor
23.9): RemoteHost, GlobalJobId, GPUsProvisioned, CpusProvisioned, AssignedGPUs, AcctGroup
included. So nothing read from a job ad decides where the proxy connects or what is
charged: the machine a job runs on is what the startd that holds its claim reports
(``condor_status``: slot ads, which users cannot edit; ``parse_claims``), and usage is
bounded below by what the portal asked for (schedulers/htcondor/scheduler.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from common.text import plain_line
from schedulers.seam import JobKey

# The attributes every query asks for; nothing else is read.
JOB_ATTRIBUTES = (
    "ClusterId",
    "ProcId",
    "Owner",
    "PortalName",
    "JobStatus",
    "HoldReason",
    "HoldReasonCode",
    "RemoveReason",
    "ExitCode",
    "ExitBySignal",
    "ExitSignal",
    "RemoteHost",
    "LastRemoteHost",
    "NumJobStarts",
    "JobCurrentStartDate",
    "JobStartDate",
    "CompletionDate",
    "EnteredCurrentStatus",
    "RemoteWallClockTime",
    "RequestCpus",
    "RequestGpus",
    "CpusProvisioned",
    "GPUsProvisioned",
    "LastRejMatchReason",
    "AssignedGPUs",
)

# What is read of a claimed slot's ad (condor_status): set by the startd, not by the job.
CLAIM_ATTRIBUTES = ("Name", "Machine", "State", "JobId", "RemoteOwner", "Cpus", "GPUs")

# A scheduler id the portal stores for an HTCondor job: "<cluster>.<proc>".
SCHEDULER_ID = re.compile(r"(\d{1,12})\.(\d{1,9})\Z")
# Longest text kept from one attribute (a hold reason can be long).
MAX_TEXT = 500
# At most this many ads are read from one answer; more is refused whole, never cut.
MAX_ADS = 100_000

# HTCondor's JobStatus numbers.
IDLE, RUNNING, REMOVED, COMPLETED, HELD, TRANSFERRING_OUTPUT, SUSPENDED = range(1, 8)


class Unparsable(ValueError):
    """The command's output as a whole is not what it should be (not one bad job)."""


@dataclass(frozen=True)
class CondorJob:
    """One job ad, as data."""

    scheduler_id: str  # "<cluster>.<proc>"
    owner: str
    name: str  # PortalName: the portal job's (or array's) name
    status: int  # JobStatus
    hold_reason: str = ""
    hold_code: int | None = None
    remove_reason: str = ""
    exit_code: int | None = None
    exit_by_signal: bool = False
    exit_signal: int | None = None
    # The execute machine's name (RemoteHost or LastRemoteHost, after "@"), and the slot
    # RemoteHost names ("slot1_1@node7"): what the job ad says, for display and to look the
    # claim up; the job can edit both, so neither is where a session is routed.
    node: str = ""
    slot: str = ""
    starts: int = 0  # NumJobStarts
    started_at: datetime | None = None
    ended_at: datetime | None = None
    wall_seconds: int = 0  # RemoteWallClockTime: every run so far
    cpus: int = 0  # CpusProvisioned, else RequestCpus (the job can edit both)
    gpus: int = 0  # GPUsProvisioned, else how many AssignedGPUs, else RequestGpus (idem)
    unmatched: bool = False  # the negotiator found no machine for it in its last cycle


def _int(value, high: int = 2**53) -> int | None:
    """A number of the ad, or None where it is none or beyond ``high`` (a job can put any
    number into its own ad: none reaches a database column out of its range)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value == value:
        value = int(value) if abs(value) < 2**53 else None
    if not isinstance(value, int) or abs(value) > high:
        return None
    return value


# Bounds of what is kept from an ad (a job's own ad is its to edit).
MAX_STARTS = 10_000
MAX_COUNT = 100_000  # CPUs, GPUs
MAX_SECONDS = 10 * 366 * 86400


def _text(value) -> str:
    return plain_line(value[:MAX_TEXT]) if isinstance(value, str) else ""


def _epoch(value) -> datetime | None:
    seconds = _int(value)
    if not seconds or seconds <= 0:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}")
_SLOT = re.compile(r"[A-Za-z0-9_.@-]{1,200}@[A-Za-z0-9][A-Za-z0-9.-]{0,252}")


def _machine(value) -> str:
    """'slot1_1@node7.example.org' -> 'node7.example.org' (a hostname, or nothing)."""
    text = _text(value).rpartition("@")[2]
    return text if _HOST.fullmatch(text) else ""


def _slot(value) -> str:
    """'slot1_1@node7.example.org' as it is, if it is a slot's name; else nothing."""
    text = value if isinstance(value, str) else ""
    return text if _SLOT.fullmatch(text) else ""


def _count(ad: dict, *keys: str) -> int:
    """The first of ``keys`` the ad holds a usable count in (0 if none)."""
    for key in keys:
        value = _int(ad.get(key), MAX_COUNT)
        if value is not None and value >= 0:
            return value
    return 0


def _gpus(ad: dict) -> int:
    provisioned = _int(ad.get("gpusprovisioned"), MAX_COUNT)
    if provisioned is not None and provisioned >= 0:
        return provisioned
    assigned = _text(ad.get("assignedgpus"))
    if assigned:
        return min(len([d for d in assigned.split(",") if d.strip()]), MAX_COUNT)
    return _count(ad, "requestgpus")


def parse_ads(output: str, command: str) -> list[dict]:
    """The ads of a ``-json`` answer, attribute names lower-cased. An empty answer (no
    job matched) is an empty list; anything but a list of objects is Unparsable."""
    if not output.strip():
        return []
    try:
        document = json.loads(output)
    except (ValueError, RecursionError) as exc:
        raise Unparsable(f"{command} -json printed no JSON document: {exc}") from None
    if not isinstance(document, list) or len(document) > MAX_ADS:
        raise Unparsable(f"{command} -json printed no list of job ads")
    return [{str(k).lower(): v for k, v in ad.items()} for ad in document if isinstance(ad, dict)]


def parse_jobs(output: str, command: str, username: str) -> list[CondorJob]:
    """``condor_q``/``condor_history -json -attributes JOB_ATTRIBUTES`` -> ``username``'s
    jobs. An ad without a readable id or status is skipped (one odd ad never hides the
    others); another owner's ad too, whatever its text says."""
    jobs = []
    for ad in parse_ads(output, command):
        cluster, proc, status = _int(ad.get("clusterid")), _int(ad.get("procid")), None
        status = _int(ad.get("jobstatus"))
        owner = ad.get("owner")
        if cluster is None or proc is None or status is None or owner != username:
            continue
        started = _epoch(ad.get("jobcurrentstartdate")) or _epoch(ad.get("jobstartdate"))
        final = status in (REMOVED, COMPLETED)
        ended = None
        if final:
            ended = _epoch(ad.get("completiondate")) or _epoch(ad.get("enteredcurrentstatus"))
        jobs.append(
            CondorJob(
                scheduler_id=f"{cluster}.{proc}",
                owner=owner,
                name=_text(ad.get("portalname")),
                status=status,
                hold_reason=_text(ad.get("holdreason")),
                hold_code=_int(ad.get("holdreasoncode")),
                remove_reason=_text(ad.get("removereason")),
                exit_code=_int(ad.get("exitcode"), 255),
                exit_by_signal=ad.get("exitbysignal") is True,
                exit_signal=_int(ad.get("exitsignal"), 255),
                node=_machine(ad.get("remotehost")) or _machine(ad.get("lastremotehost")),
                slot=_slot(ad.get("remotehost")),
                starts=max(0, _int(ad.get("numjobstarts"), MAX_STARTS) or 0),
                started_at=started,
                ended_at=ended,
                wall_seconds=max(0, _int(ad.get("remotewallclocktime"), MAX_SECONDS) or 0),
                cpus=_count(ad, "cpusprovisioned", "requestcpus"),
                gpus=_gpus(ad),
                unmatched=bool(_text(ad.get("lastrejmatchreason"))),
            )
        )
    return jobs


def match_jobs(jobs: list[CondorJob], expected: Collection[JobKey]) -> dict[JobKey, CondorJob]:
    """The ads of the expected jobs ((scheduler id, portal name) each), by key: an ad
    counts for a job only under its id and its PortalName, so an id reused after the
    schedd lost its queue is not this job, and two portal jobs holding one id each get
    the ad with their own name, or none."""
    found = {}
    for job in jobs:
        key = JobKey(job.scheduler_id, job.name)
        if job.name and key in expected:
            found[key] = job
    return found


@dataclass(frozen=True)
class Claim:
    """A claimed slot as its startd reports it to the collector (a slot ad: the job's
    owner cannot edit it, unlike the job's own ad)."""

    slot: str  # Name: "slot1_1@node7"
    machine: str  # Machine: the execute machine's name, where its sessions are routed
    job_id: str  # JobId: "<cluster>.<proc>" of the job running in it
    owner: str  # RemoteOwner's user name (before "@")
    cpus: int
    gpus: int


def parse_claims(output: str) -> list[Claim]:
    """``condor_status -json -attributes CLAIM_ATTRIBUTES``: the claimed slots running a
    job. A slot ad without a slot name, machine, job id or owner is left out."""
    claims = []
    for ad in parse_ads(output, "condor_status"):
        slot, machine = _slot(ad.get("name")), _machine(ad.get("machine"))
        job_id, owner = ad.get("jobid"), ad.get("remoteowner")
        job_id = job_id if isinstance(job_id, str) else ""
        owner = owner.partition("@")[0] if isinstance(owner, str) else ""
        if ad.get("state") != "Claimed" or not slot or not machine:
            continue
        if not SCHEDULER_ID.match(job_id) or not owner:
            continue
        claims.append(Claim(slot, machine, job_id, owner, _count(ad, "cpus"), _count(ad, "gpus")))
    return claims


# Messages that mean the schedd is unreachable or busy, not that the request is bad.
TRANSIENT_PATTERNS = (
    "the schedd did not answer",  # the submit step's own words (operations.py)
    "Failed to connect",
    "Can't find address",
    "Failed to fetch ads",
    "Unable to connect",
    "Connection refused",
    "timed out",
    "SECMAN:",
    "CEDAR:",
    "try again",
)


def is_transient(stderr: str) -> bool:
    text = stderr.lower()
    return any(p.lower() in text for p in TRANSIENT_PATTERNS)


@dataclass(frozen=True)
class GpuDevice:
    """One GPU as a machine ad describes it (condor_gpu_discovery's properties)."""

    name: str  # DeviceName
    capability: str  # "8.0"
    memory_mb: int
    machine: str


def parse_gpu_devices(output: str) -> list[GpuDevice]:
    """``condor_status -json``: every machine's GPUs from its nested ``GPUs_<id>`` ads
    (DeviceName, Capability, GlobalMemoryMb). Devices without those are left out."""
    devices = []
    for ad in parse_ads(output, "condor_status"):
        machine = _machine(ad.get("machine")) or _machine(ad.get("name"))
        for key, value in ad.items():
            if not key.startswith("gpus_") or not isinstance(value, dict):
                continue
            props = {str(k).lower(): v for k, v in value.items()}
            name = _text(props.get("devicename"))[:100]
            capability = props.get("capability")
            memory = _int(props.get("globalmemorymb"))
            if not name or not isinstance(capability, int | float) or not memory:
                continue
            if isinstance(capability, bool) or not 0 < capability < 100 or memory <= 0:
                continue
            devices.append(GpuDevice(name, f"{float(capability):.1f}", memory, machine))
    return devices
