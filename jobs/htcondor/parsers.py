"""Pure functions from HTCondor's output to data. No I/O here: tests feed captured output.

``condor_q -json`` and ``condor_history -json`` print a JSON list of job ClassAds with
the attributes asked for (``-attributes``, a fixed list): HTCondor escapes every string,
so a job's name, arguments or hold reason cannot change the structure. Attribute names
are case-insensitive in ClassAds (``RequestGpus`` comes back as ``RequestGPUs``): they are
compared lower-cased. What a job can write into its own ad (``condor_qedit``, a hold
reason) is bounded and shown as text only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from jobs.text import plain_line

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
    "LastRejMatchReason",
    "AssignedGPUs",
    "AcctGroup",
)

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
    node: str = ""  # the execute machine's name (RemoteHost or LastRemoteHost, after "@")
    starts: int = 0  # NumJobStarts
    started_at: datetime | None = None
    ended_at: datetime | None = None
    wall_seconds: int = 0  # RemoteWallClockTime: every run so far
    cpus: int = 0
    gpus: int = 0
    unmatched: bool = False  # the negotiator found no machine for it in its last cycle
    account: str = ""


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


def _machine(value) -> str:
    """'slot1_1@node7.example.org' -> 'node7.example.org' (a hostname, or nothing)."""
    text = _text(value).rpartition("@")[2]
    return text if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}", text) else ""


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
                starts=max(0, _int(ad.get("numjobstarts"), MAX_STARTS) or 0),
                started_at=started,
                ended_at=ended,
                wall_seconds=max(0, _int(ad.get("remotewallclocktime"), MAX_SECONDS) or 0),
                cpus=max(0, _int(ad.get("requestcpus"), MAX_COUNT) or 0),
                gpus=max(0, _int(ad.get("requestgpus"), MAX_COUNT) or 0),
                unmatched=bool(_text(ad.get("lastrejmatchreason"))),
                account=_text(ad.get("acctgroup"))[:64],
            )
        )
    return jobs


def match_jobs(jobs: list[CondorJob], expected: dict[str, str]) -> dict[str, CondorJob]:
    """The ads of the expected jobs ({scheduler id: portal name}); an id whose ad names
    another job is not this job (an id reused after the schedd lost its queue)."""
    found = {}
    for job in jobs:
        if expected.get(job.scheduler_id) == job.name and job.name:
            found[job.scheduler_id] = job
    return found


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
