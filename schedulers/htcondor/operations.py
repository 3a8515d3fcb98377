"""HTCondor commands on one account's connection to an access point: submit, query,
cancel, release.

Remote shell snippets here are fixed text; every value reaches them as a positional
parameter (``bash -c SCRIPT name ARG1 ARG2``) and is checked there before it is used in a
ClassAd constraint. Constraints built here hold only numbers and pattern-checked names.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Collection

from clusters import ssh
from clusters.workdir import ENTER_WORK_DIR, MEMBER_DIRS, WORK_DIR_SECRETS
from schedulers.htcondor import parsers
from schedulers.htcondor.submit import SEPARATOR
from schedulers.seam import Attempt, JobKey, Submission

log = logging.getLogger(__name__)

# One condor_q or condor_history answer; larger is refused, not read in part.
QUERY_MAX_BYTES = 32 * 1024 * 1024
# How far back condor_history looks for an adopted or ended job (ads, newest first).
HISTORY_SCAN_LIMIT = 20_000
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")


SchedulerUnavailable = ssh.SchedulerUnavailable


# Run a HTCondor command: ssh.run_scheduler_command with this adapter's word on which
# errors mean "busy or down" (SchedulerUnavailable, retried).
run = functools.partial(ssh.run_scheduler_command, is_transient=parsers.is_transient)


# The submit step: the description and script from stdin into job.sub and job.sh, then
# condor_submit unless this job (or array) was submitted already: a retried or duplicated
# submit finds the recorded id, or the job by its unique PortalName in the queue or the
# history, instead of submitting twice. flock serialises two workers.
_ADOPT_OR_SUBMIT = r"""
case $name in ''|*[!A-Za-z0-9_.-]*) echo "portal: bad job name" >&2; exit 3 ;; esac
: > job.sub.tmp
while IFS= read -r line; do
    [ "$line" = "$separator" ] && break
    printf '%s\n' "$line" >> job.sub.tmp
done
cat > job.sh.tmp
chmod 700 job.sh.tmp
mv -f job.sub.tmp job.sub
mv -f job.sh.tmp job.sh
exec 9>>.submit.lock
if command -v flock >/dev/null 2>&1; then flock 9; fi
if [ -s .scheduler_id ]; then
    echo "existing $(cat .scheduler_id)"
    exit 0
fi
# =?= compares case-sensitively. A query that fails says nothing: submitting then could
# run the job twice, so the step stops and is retried (transient).
mine="PortalName =?= \"$name\" && Owner =?= \"$(id -un)\""
unsure() { echo "portal: the schedd did not answer ($1); not submitted, try again" >&2; exit 75; }
found=$(condor_q -constraint "$mine" -af ClusterId) || unsure condor_q
if [ -z "$found" ]; then
    found=$(condor_history -constraint "$mine" -af ClusterId -limit 1 -scanlimit "$scan") \
        || unsure condor_history
fi
found=${found%%$'\n'*}
case $found in *[!0-9]*) echo "portal: unexpected answer from condor_q: $found" >&2; exit 4 ;; esac
if [ -n "$found" ]; then
    echo "$found" > .scheduler_id
    echo "existing $found"
    exit 0
fi
out=$(condor_submit -terse - < job.sub)
# "12.0 - 12.0" (or "12.0 - 12.9" for a cluster of procs), whatever else it printed.
id=$(printf '%s\n' "$out" | sed -n 's/^\([0-9][0-9]*\)\.[0-9][0-9]* - \1\.[0-9][0-9]*$/\1/p' | head -n 1)
[ -n "$id" ] || { echo "portal: condor_submit said: $out" >&2; exit 4; }
echo "$id" > .scheduler_id
echo "submitted $id"
"""

_SUBMIT = (
    """
set -e
dir=$1
name=$2
separator=$3
scan=$4
"""
    + ENTER_WORK_DIR
    + WORK_DIR_SECRETS
    + _ADOPT_OR_SUBMIT
)

_SUBMIT_ARRAY = (
    """
set -e
dir=$1
name=$2
separator=$3
scan=$4
count=$5
"""
    + ENTER_WORK_DIR
    + MEMBER_DIRS
    + _ADOPT_OR_SUBMIT
)


def _submission(result: ssh.Result) -> tuple[str, bool]:
    words = result.stdout.split()
    if len(words) < 2 or words[-2] not in ("existing", "submitted") or not words[-1].isdigit():
        raise ssh.CommandFailed(f"unexpected answer from the submit step: {result.stdout!r}")
    return words[-1], words[-2] == "existing"


def _check_submitted(text: str) -> None:
    if SEPARATOR not in text.split("\n"):
        raise ValueError("what is submitted to HTCondor is job.sub, the separator, then job.sh")


def submit(
    conn: ssh.Connection,
    work_dir: str,
    job_name: str,
    script: str,
    secret: str = "",
    metrics_token: str = "",
) -> Submission:
    """Submit (or adopt) one job: ``script`` is job.sub, SEPARATOR, job.sh (submit.py).
    Its id is '<cluster>.0'."""
    if "\n" in secret or "\n" in metrics_token:
        raise ValueError("a secret is one line")
    _check_submitted(script)
    result = _run_submit(
        conn,
        [_SUBMIT, "portal-submit", work_dir, job_name, SEPARATOR, str(HISTORY_SCAN_LIMIT)],
        f"{secret}\n{metrics_token}\n{script}",
    )
    cluster, adopted = _submission(result)
    return Submission(f"{cluster}.0", adopted=adopted)


def submit_array(
    conn: ssh.Connection,
    work_dir: str,
    name: str,
    script: str,
    tokens: list[tuple[int, str]],
) -> Submission:
    """Submit (or adopt) a cluster of procs whose members work in ``<work_dir>/<proc>``.
    Returns the cluster's id."""
    _check_submitted(script)
    lines = []
    for index, token in tokens:
        if not isinstance(index, int) or index < 0 or any(c.isspace() for c in token):
            raise ValueError("a member is a non-negative index and a one-word token")
        lines.append(f"{index} {token}\n")
    result = _run_submit(
        conn,
        [
            _SUBMIT_ARRAY,
            "portal-submit-array",
            work_dir,
            name,
            SEPARATOR,
            str(HISTORY_SCAN_LIMIT),
            str(len(tokens)),
        ],
        "".join(lines) + script,
    )
    cluster, adopted = _submission(result)
    return Submission(cluster, adopted=adopted)


def _run_submit(conn: ssh.Connection, args: list[str], stdin: str) -> ssh.Result:
    return run(conn, ["bash", "-c", *args], stdin=stdin, clean=False)  # (the submit step)


def _ids(expected: Collection[JobKey]) -> dict[int, set[int]]:
    """{cluster: {procs}} of the expected jobs' scheduler ids; any other id is refused."""
    clusters: dict[int, set[int]] = {}
    for scheduler_id, _ in expected:
        match = parsers.SCHEDULER_ID.match(scheduler_id)
        if not match:
            raise ValueError(f"not an HTCondor job id: {scheduler_id!r}")
        clusters.setdefault(int(match.group(1)), set()).add(int(match.group(2)))
    return clusters


def jobs(
    conn: ssh.Connection, username: str, expected: Collection[JobKey], since: int | None = None
) -> dict[JobKey, parsers.CondorJob]:
    """The ads of the given jobs ((scheduler id, portal name) each), by key, in at most
    two commands, however many jobs: ``condor_q`` for the queue (every job of the user),
    then ``condor_history`` for those no longer in it, read back to ``since`` (epoch
    seconds: before any of them was submitted; the history is shared, so a count of ads
    would let another user's burst of jobs hide these). An ad counts only for the job of
    its id, name and owner (parsers.match_jobs); jobs neither knows are left out (unknown
    is not ended)."""
    if not expected:
        return {}
    attributes = ",".join(parsers.JOB_ATTRIBUTES)
    out = run(
        conn,
        ["condor_q", "-json", "-attributes", attributes, _user(username)],
        max_bytes=QUERY_MAX_BYTES,
    ).stdout
    try:
        found = parsers.match_jobs(parsers.parse_jobs(out, "condor_q", username), expected)
    except parsers.Unparsable as exc:
        raise SchedulerUnavailable(str(exc)) from None
    missing = {key for key in expected if key not in found}
    if missing:
        clusters = ",".join(str(c) for c in sorted(_ids(missing)))
        constraint = f'Owner =?= "{_user(username)}" && member(ClusterId, {{{clusters}}})'
        bound = (
            ["-since", f"EnteredCurrentStatus < {int(since)}"]
            if since is not None
            else ["-scanlimit", str(HISTORY_SCAN_LIMIT)]
        )
        out = run(
            conn,
            [
                "condor_history",
                "-json",
                "-attributes",
                attributes,
                "-constraint",
                constraint,
                *bound,
            ],
            max_bytes=QUERY_MAX_BYTES,
        ).stdout
        try:
            ended = parsers.parse_jobs(out, "condor_history", username)
        except parsers.Unparsable as exc:
            raise SchedulerUnavailable(str(exc)) from None
        found.update(parsers.match_jobs(ended, missing))
    return found


def _user(username: str) -> str:
    if not re.fullmatch(r"[a-z_][a-z0-9_.-]{0,31}", username):
        raise ValueError(f"not a user name: {username!r}")
    return username


def attempts(
    conn: ssh.Connection, username: str, expected: Collection[JobKey], since: int | None = None
) -> dict[JobKey, list[Attempt]]:
    """What each job held and for how long, from its ad (HTCondor keeps no per-run
    accounting the portal can read: one row per job, every run's wall time summed), by
    key like jobs()."""
    runs = {}
    for key, job in jobs(conn, username, expected, since).items():
        if job.started_at is None:
            continue
        final = job.status in (parsers.REMOVED, parsers.COMPLETED)
        runs[key] = [
            Attempt(
                scheduler_state={parsers.REMOVED: "REMOVED", parsers.COMPLETED: "COMPLETED"}.get(
                    job.status, "RUNNING"
                ),
                node=job.node,
                started_at=job.started_at,
                ended_at=job.ended_at if final else None,
                elapsed_seconds=job.wall_seconds,
                gpus=job.gpus,
                cpus=job.cpus,
            )
        ]
    return runs


def claims(conn: ssh.Connection, job_ids: list[str]) -> list[parsers.Claim]:
    """The claimed slots running any of ``job_ids`` ("<cluster>.<proc>"), as their
    startds report them: one ``condor_status`` however many jobs. Raises
    SchedulerUnavailable when the collector does not answer (or answers nonsense)."""
    if not job_ids:
        return []
    for job_id in job_ids:
        if not parsers.SCHEDULER_ID.match(job_id):
            raise ValueError(f"not an HTCondor job id: {job_id!r}")
    ids = ",".join(f'"{job_id}"' for job_id in sorted(set(job_ids)))
    out = run(
        conn,
        [
            "condor_status",
            "-json",
            "-attributes",
            ",".join(parsers.CLAIM_ATTRIBUTES),
            "-constraint",
            f'State =?= "Claimed" && member(JobId, {{{ids}}})',
        ],
        max_bytes=QUERY_MAX_BYTES,
    ).stdout
    try:
        return parsers.parse_claims(out)
    except parsers.Unparsable as exc:
        raise SchedulerUnavailable(str(exc)) from None


def _one(scheduler_id: str, job_name: str) -> str:
    """The constraint that names one job by id and portal name."""
    match = parsers.SCHEDULER_ID.match(scheduler_id)
    if not match or not _NAME.match(job_name):
        raise ValueError(f"not an HTCondor job: {scheduler_id!r} {job_name!r}")
    cluster, proc = match.groups()
    return f'ClusterId == {int(cluster)} && ProcId == {int(proc)} && PortalName =?= "{job_name}"'


def cancel(conn: ssh.Connection, scheduler_id: str, job_name: str) -> None:
    """condor_rm the job, only while ``scheduler_id`` still carries ``job_name``."""
    _act(conn, "condor_rm", scheduler_id, job_name)


def cancel_named(conn: ssh.Connection, username: str, job_name: str) -> None:
    """condor_rm every job of ``username`` whose PortalName is ``job_name`` (one the portal
    may have submitted without learning its id); nothing named so is not an error."""
    if not _NAME.match(job_name):
        raise ValueError(f"not a portal job name: {job_name!r}")
    constraint = f'PortalName =?= "{job_name}" && Owner =?= "{_user(username)}"'
    _run_remove(conn, "condor_rm", constraint)


def release(conn: ssh.Connection, username: str, scheduler_id: str, job_name: str) -> None:
    """condor_release the held job, only while ``scheduler_id`` still carries ``job_name``."""
    _act(conn, "condor_release", scheduler_id, job_name)


def _act(conn: ssh.Connection, command: str, scheduler_id: str, job_name: str) -> None:
    _run_remove(conn, command, _one(scheduler_id, job_name))


def _run_remove(conn: ssh.Connection, command: str, constraint: str) -> None:
    result = run(conn, [command, "-constraint", constraint], check=False)
    if result.exit_status == 0:
        return
    text = f"{result.stdout}\n{result.stderr}"
    if parsers.is_transient(text):
        raise SchedulerUnavailable(text.strip(), stderr=result.stderr)
    # Nothing matched: it has left the queue (ended, or removed already).
    if "Couldn't find" in text or "matching constraint" in text or "no jobs" in text.lower():
        return
    raise ssh.CommandFailed(
        text.strip() or f"{command} failed", stderr=result.stderr, exit_status=result.exit_status
    )


def gpu_devices(conn: ssh.Connection) -> list[parsers.GpuDevice] | None:
    """Every GPU the pool's machines report (one ``condor_status -json``); None when the
    collector does not answer."""
    try:
        out = run(conn, ["condor_status", "-json"], max_bytes=QUERY_MAX_BYTES).stdout
        return parsers.parse_gpu_devices(out)
    except (ssh.CommandFailed, parsers.Unparsable) as exc:
        log.warning("condor_status: GPUs unknown (%s)", exc)
        return None
