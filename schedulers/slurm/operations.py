"""Slurm commands on one account's connection: submit, query, cancel, release, check images.
(Files in work directories: files.py.)

Remote shell snippets here are fixed text; every value reaches them as a
positional parameter (``bash -c SCRIPT name ARG1 ARG2``), never interpolated.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import replace

from clusters import ssh
from clusters.workdir import ENTER_WORK_DIR, MEMBER_DIRS, WORK_DIR_SECRETS
from schedulers.seam import Attempt, JobKey, Submission
from schedulers.slurm import arrays, parsers, sinfo
from schedulers.slurm.attempts import parse_attempts_of_owners
from schedulers.slurm.json_fields import Unparsable

log = logging.getLogger(__name__)


SchedulerUnavailable = ssh.SchedulerUnavailable


# Run a Slurm command: ssh.run_scheduler_command with this adapter's word on which
# errors mean "busy or down" (SchedulerUnavailable, retried).
run = functools.partial(ssh.run_scheduler_command, is_transient=parsers.is_transient)


# How both submit steps end: keep the script in the work directory and submit it unless
# this portal job (or array) was submitted already: a retried or duplicated submit finds
# the recorded id (or the job by its unique name; squeue's field $id_format: %i a job's
# id, %F an array's) instead of submitting twice. flock serialises two workers that reach
# this point for the same job.
_ADOPT_OR_SUBMIT = r"""
cat > job.sh.tmp
mv -f job.sh.tmp job.sh
exec 9>>.submit.lock
if command -v flock >/dev/null 2>&1; then flock 9; fi
if [ -s .scheduler_id ]; then
    echo "existing $(cat .scheduler_id)"
    exit 0
fi
found=$(squeue -h --states=all -u "$(id -un)" --name="$name" -o $id_format | head -n 1)
if [ -n "$found" ]; then
    echo "$found" > .scheduler_id
    echo "existing $found"
    exit 0
fi
id=$(sbatch --parsable job.sh)
id=${id%%;*}
echo "$id" > .scheduler_id
echo "submitted $id"
"""

# Creates the work directory (private) with the job's private files, then _ADOPT_OR_SUBMIT.
_SUBMIT = (
    """
set -e
dir=$1
name=$2
"""
    + ENTER_WORK_DIR
    + WORK_DIR_SECRETS
    + _ADOPT_OR_SUBMIT.replace("$id_format", "%i")
)


def submit(
    conn: ssh.Connection,
    work_dir: str,
    job_name: str,
    script: str,
    secret: str = "",
    metrics_token: str = "",
) -> Submission:
    """Submit (or adopt) the job. ``secret`` and ``metrics_token`` go into private
    files in the work directory, never on a command line."""
    if "\n" in secret or "\n" in metrics_token:
        raise ValueError("a secret is one line")
    stdin = f"{secret}\n{metrics_token}\n{script}"
    result = run(
        conn,
        ["bash", "-c", _SUBMIT, "portal-submit", work_dir, job_name],
        stdin=stdin,
        clean=False,  # (sbatch gives the job the submitter's environment)
    )
    words = result.stdout.split()
    if len(words) < 2 or words[-2] not in ("existing", "submitted"):
        raise ssh.CommandFailed(f"unexpected answer from the submit step: {result.stdout!r}")
    return Submission(parsers.parse_sbatch(words[-1]), adopted=words[-2] == "existing")


# The array's version of _SUBMIT: each member's directory with its private metrics
# token, then the same _ADOPT_OR_SUBMIT under the array's name.
_SUBMIT_ARRAY = (
    """
set -e
dir=$1
name=$2
count=$3
"""
    + ENTER_WORK_DIR
    + MEMBER_DIRS
    + _ADOPT_OR_SUBMIT.replace("$id_format", "%F")
)


def submit_array(
    conn: ssh.Connection,
    work_dir: str,
    name: str,
    script: str,
    tokens: list[tuple[int, str]],
) -> Submission:
    """Submit (or adopt) a job array whose members work in ``<work_dir>/<index>``;
    ``tokens`` are the members' metrics upload tokens (private files, never arguments).
    Returns the array's id."""
    lines = []
    for index, token in tokens:
        if not isinstance(index, int) or index < 0 or any(c.isspace() for c in token):
            raise ValueError("a member is a non-negative index and a one-word token")
        lines.append(f"{index} {token}\n")
    stdin = "".join(lines) + script
    result = run(
        conn,
        ["bash", "-c", _SUBMIT_ARRAY, "portal-submit-array", work_dir, name, str(len(tokens))],
        stdin=stdin,
        clean=False,  # (sbatch gives the jobs the submitter's environment)
    )
    words = result.stdout.split()
    if len(words) < 2 or words[-2] not in ("existing", "submitted"):
        raise ssh.CommandFailed(f"unexpected answer from the submit step: {result.stdout!r}")
    return Submission(parsers.parse_sbatch(words[-1]), adopted=words[-2] == "existing")


# {owner's user name: {(scheduler id, the portal's job name): the job's comment}}: the
# jobs a sync asks about (the comment JobRef.comment, the script's --comment; "": not
# checked).
Expected = dict[str, dict[JobKey, str]]
# {owner's user name: {(scheduler id, name): what Slurm said}}.
Found = dict[str, dict[JobKey, parsers.SlurmJob]]


def query(
    conn: ssh.Connection, username: str, expected: dict[JobKey, str]
) -> dict[JobKey, parsers.SlurmJob]:
    """Status of ``username``'s jobs ({(scheduler id, the portal's job name): comment}) on
    that user's own connection: query_owners() for one owner."""
    return query_owners(conn, {username: expected}).get(username, {})


def query_owners(conn: ssh.Connection, expected: Expected) -> Found:
    """Status of several owners' jobs in at most four commands, however many jobs and
    owners: the cost of a sync is per cluster, not per account.

    ``squeue --json`` for the jobs the controller holds (ended ones too, for MinJobAge),
    ``sinfo`` when some wait for resources, then ``sacct`` (two commands) for those it no
    longer holds. With several owners ``conn`` must be allowed to see every user's jobs
    (Slurm shows them unless ``PrivateData=jobs``); a job it cannot see is simply left
    out, as is one nobody knows: unknown is not the same as ended. A record counts for a
    job only under its id, name and owner (parsers.match_jobs): an id may have been
    reissued to another job, of the same owner even.
    """
    wanted = {owner: jobs for owner, jobs in expected.items() if jobs}
    if not wanted:
        return {}
    from django.conf import settings

    only = next(iter(wanted)) if len(wanted) == 1 else None
    # (22.05 lists every user's jobs with --json whatever -u says; later versions obey it.)
    argv = ["squeue", "--json", "--states=all"] + (["-u", only] if only else [])
    out = run(conn, argv, max_bytes=settings.PORTAL_SQUEUE_MAX_BYTES).stdout
    try:
        live = _by_owner(parsers.parse_squeue_json(out, only))
    except Unparsable as exc:
        raise SchedulerUnavailable(str(exc)) from None
    found = {owner: parsers.match_jobs(live.get(owner, []), jobs) for owner, jobs in wanted.items()}
    short = [
        (owner, key)
        for owner, statuses in found.items()
        for key, st in statuses.items()
        if st.state == "pending" and st.reason == "Resources"
    ]
    if short:
        nodes = free_on_nodes(conn)
        if nodes is not None:
            for owner, key in short:
                part = found[owner][key].partition
                found[owner][key] = replace(
                    found[owner][key], free=tuple(n for n in nodes if part in n.partitions)
                )
    missing = {
        owner: {key: jobs[key] for key in sorted(jobs) if key not in found[owner]}
        for owner, jobs in wanted.items()
    }
    missing = {owner: jobs for owner, jobs in missing.items() if jobs}
    if missing:
        for owner, settled in accounting_owners(conn, missing).items():
            found[owner].update(settled)
    return found


def _by_owner(statuses: list[parsers.SlurmJob]) -> dict[str, list[parsers.SlurmJob]]:
    grouped: dict[str, list[parsers.SlurmJob]] = {}
    for status in statuses:
        grouped.setdefault(status.user, []).append(status)
    return grouped


def free_on_nodes(conn: ssh.Connection) -> list[sinfo.NodeFree] | None:
    """What every node has free (one ``sinfo --json``); None when sinfo cannot say: a
    pending job then keeps the general 'waiting for free resources'."""
    try:
        out = run(conn, ["sinfo", "--json"], max_bytes=16 * 1024 * 1024).stdout
        return sinfo.parse_sinfo_json(out)
    except (ssh.CommandFailed, Unparsable) as exc:
        log.warning("sinfo: free resources unknown (%s)", exc)
        return None


def accounting(
    conn: ssh.Connection, username: str, expected: dict[JobKey, str]
) -> dict[JobKey, parsers.SlurmJob]:
    """accounting_owners() for one owner."""
    return accounting_owners(conn, {username: expected}).get(username, {})


def accounting_owners(conn: ssh.Connection, expected: Expected) -> Found:
    """What accounting (slurmdbd) says of jobs the controller no longer holds: states from
    ``sacct --json`` (structure no name can change), exit codes from ``sacct -P`` where its
    one line for the id agrees (22.05's JSON misreports them); two commands for every
    owner together. {} without accounting. A record with no owner (a job recorded before
    its user had an association) counts for whoever expects that id under that name.
    (Without ``-D`` sacct answers an id with its newest job only: a job whose id was
    reissued finds the other job's record there, under another name, and none.)"""
    only = next(iter(expected)) if len(expected) == 1 else None
    ids = _accounting_ids(expected)
    acct = run(conn, ["sacct", "--json", "-X", "-j", ids], check=False)
    if acct.exit_status != 0:
        if parsers.accounting_disabled(acct.stderr):
            return {}
        raise SchedulerUnavailable(f"sacct failed: {acct.stderr.strip()}", stderr=acct.stderr)
    try:
        records = _by_owner(parsers.parse_sacct_json(acct.stdout, only))
    except Unparsable as exc:
        raise SchedulerUnavailable(str(exc)) from None
    mine = {owner: records.get(owner, []) + records.get("", []) for owner in expected}
    settled = {owner: parsers.match_jobs(mine[owner], jobs) for owner, jobs in expected.items()}
    final = {
        owner: {i: s for i, s in statuses.items() if s.is_final and s.signal is None}
        for owner, statuses in settled.items()
    }
    final_ids = sorted({key.scheduler_id for statuses in final.values() for key in statuses})
    if final_ids:
        text = run(
            conn,
            [
                "sacct",
                "-n",
                "-P",
                "-X",
                f"--delimiter={parsers.FIELD_SEP}",
                "-j",
                ",".join(final_ids),
                "-o",
                ",".join(parsers.SACCT_FIELDS),
            ],
        ).stdout
        for owner, statuses in final.items():
            for key, (code, signal) in parsers.exit_codes(text, owner, statuses).items():
                settled[owner][key] = replace(settled[owner][key], exit_code=code, signal=signal)
    for owner, jobs in expected.items():
        settled[owner].update(arrays.remainder_tasks(mine[owner], jobs, settled[owner]))
    return settled


# One sacct -D answer for a sync's worth of ended jobs; larger is refused, not read in part.
ATTEMPTS_MAX_BYTES = 16 * 1024 * 1024


def _accounting_ids(expected: Expected) -> str:
    """The ids sacct is asked for, comma-separated: an array's tasks that never started
    stay in the array's own record, so a task is asked by the array's id, which also
    lists its tasks that did start."""
    return ",".join(
        sorted({key.scheduler_id.split("_")[0] for jobs in expected.values() for key in jobs})
    )


def attempts_owners(
    conn: ssh.Connection, expected: Expected
) -> dict[str, dict[JobKey, list[Attempt]]]:
    """Every run of several owners' jobs ({owner: {(scheduler id, name): comment}}) from
    one ``sacct --json -D -X`` (every job that held an id, reissued or not: each run
    counts for the job of its name only); {} without accounting."""
    ids = _accounting_ids(expected)
    if not ids:
        return {}
    acct = run(
        conn, ["sacct", "--json", "-D", "-X", "-j", ids], check=False, max_bytes=ATTEMPTS_MAX_BYTES
    )
    if acct.exit_status != 0:
        if parsers.accounting_disabled(acct.stderr):
            return {}
        raise SchedulerUnavailable(f"sacct failed: {acct.stderr.strip()}", stderr=acct.stderr)
    try:
        return parse_attempts_of_owners(acct.stdout, expected)
    except Unparsable as exc:
        raise SchedulerUnavailable(str(exc)) from None


def cancel(conn: ssh.Connection, scheduler_id: str, job_name: str) -> None:
    """scancel the job, only while ``scheduler_id`` still carries ``job_name``: after a
    controller crash the id may belong to someone else's job now."""
    result = run(conn, ["scancel", f"--name={job_name}", scheduler_id], check=False)
    if result.exit_status != 0 and parsers.is_transient(result.stderr):
        raise SchedulerUnavailable(result.stderr.strip(), stderr=result.stderr)
    if (
        result.exit_status != 0
        and "already completing or completed" not in result.stderr
        and "Invalid job id" not in result.stderr
    ):
        raise ssh.CommandFailed(
            result.stderr.strip() or "scancel failed",
            stderr=result.stderr,
            exit_status=result.exit_status,
        )


def cancel_named(conn: ssh.Connection, username: str, job_name: str) -> None:
    """scancel every job of ``username`` named ``job_name`` (one the portal may have
    submitted without learning its id); nothing named so is not an error."""
    if not re.fullmatch(r"[a-z_][a-z0-9_.-]{0,31}", username) or not re.fullmatch(
        r"portal-[a-z0-9-]{1,80}", job_name
    ):
        raise ValueError(f"not a user and portal job name: {username!r} {job_name!r}")
    result = run(conn, ["scancel", f"--name={job_name}", f"--user={username}"], check=False)
    if result.exit_status == 0:
        return
    if parsers.is_transient(result.stderr):
        raise SchedulerUnavailable(result.stderr.strip(), stderr=result.stderr)
    raise ssh.CommandFailed(
        result.stderr.strip() or "scancel failed",
        stderr=result.stderr,
        exit_status=result.exit_status,
    )


def lower_time_limit(
    conn: ssh.Connection, username: str, scheduler_id: str, job_name: str, minutes: int
) -> None:
    """``scontrol update TimeLimit=`` of a pending job (a user may lower their own job's
    limit, never raise it), only while ``scheduler_id`` still carries ``job_name``."""
    if not re.fullmatch(r"\d{1,12}(_\d{1,9})?", scheduler_id) or not 1 <= minutes <= 10**7:
        raise ValueError("a Slurm job id and a number of minutes")
    if not query(conn, username, {JobKey(scheduler_id, job_name): ""}):
        raise ssh.CommandFailed(f"Slurm job {scheduler_id} is no longer this job; not changed.")
    run(conn, ["scontrol", "update", f"JobId={scheduler_id}", f"TimeLimit={minutes}"])


def release(conn: ssh.Connection, username: str, scheduler_id: str, job_name: str) -> None:
    """``scontrol release`` the held job, only while ``scheduler_id`` still carries
    ``job_name`` (scontrol has no name filter of its own, so squeue is asked first)."""
    if not query(conn, username, {JobKey(scheduler_id, job_name): ""}):
        raise ssh.CommandFailed(f"Slurm job {scheduler_id} is no longer this job; not released.")
    run(conn, ["scontrol", "release", scheduler_id])
