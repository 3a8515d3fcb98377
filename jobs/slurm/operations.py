"""Cluster operations on one account's connection: submit, query, cancel, read logs.

Remote shell snippets here are fixed text; every value reaches them as a
positional parameter (``bash -c SCRIPT name ARG1 ARG2``), never interpolated.
"""

from __future__ import annotations

import errno
import logging
import re
import secrets
import stat
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from jobs import validators
from jobs.schedulers import Submission
from jobs.slurm import parsers, pool, ssh

log = logging.getLogger(__name__)


class SchedulerUnavailable(ssh.SlurmError):
    """The scheduler answered with an error that means 'busy or down, try again'."""

    transient = True


def run(
    conn: ssh.Connection,
    argv: list[str],
    *,
    stdin: str | None = None,
    check: bool = True,
    max_bytes: int | None = None,
) -> ssh.Result:
    """Run a Slurm command; a 'controller unreachable' error becomes SchedulerUnavailable."""
    try:
        return conn.run(argv, stdin=stdin, check=check, max_bytes=max_bytes)
    except ssh.CommandFailed as exc:
        if parsers.is_transient(exc.stderr or str(exc)):
            raise SchedulerUnavailable(
                str(exc), command=exc.command, stderr=exc.stderr, exit_status=exc.exit_status
            ) from None
        raise


# Creates the work directory (private), keeps the script there, and submits it
# unless this portal job was submitted already: a retried or duplicated submit
# finds the recorded id (or the job by its unique name) instead of submitting twice.
# flock serialises two workers that reach this point for the same job.
_SUBMIT = r"""
set -e
dir=$1
name=$2
(umask 077 && mkdir -p -- "$dir")
cd -- "$dir"
# stdin: a line with the notebook's registration secret, a line with the metrics
# upload token (either may be empty), then the script. Both go to private files.
IFS= read -r secret || true
IFS= read -r metrics_token || true
if [ -n "$secret" ]; then (umask 077 && printf '%s\n' "$secret" > .portal_secret); fi
if [ -n "$metrics_token" ]; then
    (umask 077 && printf '%s\n' "$metrics_token" > .portal_metrics_token)
fi
cat > job.sh.tmp
mv -f job.sh.tmp job.sh
exec 9>>.submit.lock
if command -v flock >/dev/null 2>&1; then flock 9; fi
if [ -s .scheduler_id ]; then
    echo "existing $(cat .scheduler_id)"
    exit 0
fi
found=$(squeue -h --states=all -u "$(id -un)" --name="$name" -o %i | head -n 1)
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
    result = run(conn, ["bash", "-c", _SUBMIT, "portal-submit", work_dir, job_name], stdin=stdin)
    words = result.stdout.split()
    if len(words) < 2 or words[-2] not in ("existing", "submitted"):
        raise ssh.CommandFailed(f"unexpected answer from the submit step: {result.stdout!r}")
    return Submission(parsers.parse_sbatch(words[-1]), adopted=words[-2] == "existing")


def query(
    conn: ssh.Connection, username: str, expected: dict[str, str]
) -> dict[str, parsers.SlurmJob]:
    """Status of the given jobs ({scheduler id: the portal's job name}) in at most three
    commands, however many jobs.

    ``squeue --json`` for the jobs the controller holds (ended ones too, for MinJobAge),
    then ``sacct`` for those it no longer holds. An id counts only while the scheduler
    reports the expected name and owner for it. Jobs nobody knows are left out: unknown
    is not the same as ended.
    """
    if not expected:
        return {}
    from django.conf import settings

    out = run(
        conn,
        ["squeue", "--json", "--states=all", "-u", username],
        max_bytes=settings.PORTAL_SQUEUE_MAX_BYTES,
    ).stdout
    try:
        live = parsers.parse_squeue_json(out, username)
    except parsers.Unparsable as exc:
        raise SchedulerUnavailable(str(exc)) from None
    found = parsers.match_jobs(live, expected)
    short = [i for i, st in found.items() if st.state == "pending" and st.reason == "Resources"]
    if short:
        nodes = free_on_nodes(conn)
        if nodes is not None:
            for i in short:
                part = found[i].partition
                found[i] = replace(found[i], free=tuple(n for n in nodes if part in n.partitions))
    missing = {i: expected[i] for i in sorted(expected) if i not in found}
    if missing:
        found.update(accounting(conn, username, missing))
    return found


def free_on_nodes(conn: ssh.Connection) -> list[parsers.NodeFree] | None:
    """What every node has free (one ``sinfo --json``); None when sinfo cannot say: a
    pending job then keeps the general 'waiting for free resources'."""
    try:
        out = run(conn, ["sinfo", "--json"], max_bytes=16 * 1024 * 1024).stdout
        return parsers.parse_sinfo_json(out)
    except (ssh.CommandFailed, parsers.Unparsable) as exc:
        log.warning("sinfo: free resources unknown (%s)", exc)
        return None


def accounting(
    conn: ssh.Connection, username: str, expected: dict[str, str]
) -> dict[str, parsers.SlurmJob]:
    """What accounting (slurmdbd) says of jobs the controller no longer holds: states from
    ``sacct --json`` (structure no name can change), exit codes from ``sacct -P`` where its
    one line for the id agrees (22.05's JSON misreports them). {} without accounting."""
    ids = ",".join(expected)
    acct = run(conn, ["sacct", "--json", "-X", "-j", ids], check=False)
    if acct.exit_status != 0:
        if parsers.accounting_disabled(acct.stderr):
            return {}
        raise SchedulerUnavailable(f"sacct failed: {acct.stderr.strip()}", stderr=acct.stderr)
    try:
        statuses = parsers.parse_sacct_json(acct.stdout, username)
    except parsers.Unparsable as exc:
        raise SchedulerUnavailable(str(exc)) from None
    settled = parsers.match_jobs(statuses, expected)
    final = {i: s for i, s in settled.items() if s.is_final and s.signal is None}
    if final:
        text = run(
            conn,
            [
                "sacct",
                "-n",
                "-P",
                "-X",
                f"--delimiter={parsers.FIELD_SEP}",
                "-j",
                ",".join(final),
                "-o",
                ",".join(parsers.SACCT_FIELDS),
            ],
        ).stdout
        for job_id, (code, signal) in parsers.exit_codes(text, username, final).items():
            settled[job_id] = replace(settled[job_id], exit_code=code, signal=signal)
    return settled


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


def release(conn: ssh.Connection, username: str, scheduler_id: str, job_name: str) -> None:
    """``scontrol release`` the held job, only while ``scheduler_id`` still carries
    ``job_name`` (scontrol has no name filter of its own, so squeue is asked first)."""
    if not query(conn, username, {scheduler_id: job_name}):
        raise ssh.CommandFailed(f"Slurm job {scheduler_id} is no longer this job; not released.")
    run(conn, ["scontrol", "release", scheduler_id])


@dataclass(frozen=True)
class LogTail:
    text: str
    size: int  # whole file size in bytes
    truncated: bool  # True when text starts after the beginning (tail) or stops early (offset)
    start: int = 0  # text is the file's bytes [start, end): a follower asks for offset=end next
    end: int = 0


def whole_utf8(data: bytes) -> bytes:
    """``data`` without a trailing, incomplete UTF-8 sequence (the rest of it is read next)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # continuation byte: look further back for the lead
            continue
        if byte < 0x80:
            return data
        needed = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
        return data[:-back] if needed > back else data
    return data


def log_slice(data: bytes, start: int, size: int, *, whole_lines: bool) -> LogTail:
    """Pure: the part of ``data`` (read at ``start`` of a ``size``-byte file) worth showing.
    A tail (``whole_lines`` and start > 0) drops its partial first line; a read that stopped
    before the end of the file ends at its last complete line; neither splits a character."""
    skip = 0
    if whole_lines and start > 0:
        skip = data.find(b"\n") + 1 if b"\n" in data else 0
    body = data[skip:]
    stopped_early = start + len(data) < size
    if stopped_early and not whole_lines and b"\n" in body:
        body = body[: body.rfind(b"\n") + 1]
    body = whole_utf8(body)
    first = start + skip
    truncated = first > 0 if whole_lines else stopped_early
    return LogTail(body.decode(errors="replace"), size, truncated, first, first + len(body))


class NotARegularFile(ssh.SlurmError):
    """A job's file is a link, FIFO, device or directory: the portal reads none of them."""


def _missing(exc: OSError) -> bool:
    return getattr(exc, "errno", None) == errno.ENOENT or isinstance(exc, FileNotFoundError)


def _check_regular(path: str, attrs) -> None:
    if not stat.S_ISREG(attrs.st_mode or 0):
        kind = _FILE_KINDS.get(stat.S_IFMT(attrs.st_mode or 0), "not a regular file")
        raise NotARegularFile(
            f"{path.rsplit('/', 1)[-1]} is {kind}; the portal reads only regular files."
        )


_FILE_KINDS = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFSOCK: "a socket",
}


@contextmanager
def open_regular(sftp, path: str):
    """Open a job's file for reading only if it is a regular file: ``lstat`` (no link is
    followed) before the open and ``fstat`` of the open handle after it (the file may have
    been swapped in between). Yields (handle, size)."""
    _check_regular(path, sftp.lstat(path))
    with sftp.open(path, "rb") as handle:
        attrs = handle.stat()
        _check_regular(path, attrs)
        yield handle, attrs.st_size or 0


def _read(conn: ssh.Connection, path: str, offset: int | None, max_bytes: int) -> LogTail:
    with conn.sftp_session() as sftp:
        try:
            with open_regular(sftp, path) as (handle, size):
                if offset is None:
                    start = max(0, size - max_bytes)
                else:
                    start = offset if offset <= size else 0  # rewritten shorter: start over
                handle.seek(start)
                data = handle.read(max_bytes)
        except OSError as exc:
            if _missing(exc):
                return LogTail("", 0, False)
            raise
    return log_slice(data, start, size, whole_lines=offset is None)


def tail(conn: ssh.Connection, path: str, max_bytes: int) -> LogTail:
    """The last ``max_bytes`` of a remote file over SFTP ('' when it does not exist yet)."""
    return _read(conn, path, None, max_bytes)


def on_account(account, operation):
    """Run ``operation(conn)`` on the account's pooled connection (one reconnect)."""
    return pool.with_connection(account, operation)


LOG_STREAMS = ("stdout", "stderr")


def read_job_log(
    job, stream: str, max_bytes: int | None = None, offset: int | None = None
) -> LogTail:
    """The end of a job's stdout or stderr (or, with ``offset``, what follows that byte),
    read over SFTP with a size bound."""
    from django.conf import settings

    if stream not in LOG_STREAMS:
        raise ValueError(f"stream must be one of {LOG_STREAMS}, not {stream!r}")
    if not job.work_dir or job.cluster_account is None:
        return LogTail("", 0, False)
    limit = max_bytes or settings.PORTAL_LOG_TAIL_BYTES
    path = f"{job.work_dir}/{stream}.log"
    return on_account(job.cluster_account, lambda conn: _read(conn, path, offset, limit))


def read_connection_file(conn: ssh.Connection, work_dir: str) -> dict | None:
    """The notebook's connection.json ({port, secret}) once it exists, else None."""
    import json

    data = tail(conn, f"{work_dir}/connection.json", 4096)
    if not data.text.strip():
        return None
    try:
        info = json.loads(data.text)
        port = int(info["port"])
        secret = str(info["secret"])
    except (ValueError, KeyError, TypeError):
        return None
    if not (1024 <= port <= 65535) or not validators.SESSION_TOKEN.match(secret):
        return None
    return {"port": port, "secret": secret}


METRICS_FILE = re.compile(r"^rank-\d{1,6}\.jsonl$")


def list_metric_files(conn: ssh.Connection, directory: str) -> list[tuple[str, int]]:
    """(name, size) of the metrics files in ``directory``, by name; [] when it is missing."""
    with conn.sftp_session() as sftp:
        try:
            entries = sftp.listdir_attr(directory)
        except OSError as exc:
            if _missing(exc):
                return []
            raise
    return sorted((e.filename, e.st_size or 0) for e in entries if METRICS_FILE.match(e.filename))


def read_chunk(conn: ssh.Connection, path: str, start: int, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of a regular file from ``start`` (b"" when it is missing)."""
    with conn.sftp_session() as sftp:
        try:
            with open_regular(sftp, path) as (handle, size):
                want = min(size - start, max_bytes)
                if want <= 0:
                    return b""
                handle.seek(start)
                handle.prefetch(want)
                return handle.read(want)
        except OSError as exc:
            if _missing(exc):
                return b""
            raise


# --- a job's work directory, browsed and downloaded from the job page --------------------

# The portal's own files in a work directory: secrets (registration, metrics token, the
# notebook's connection) are never listed or served, even to the owner.
PRIVATE_FILES = frozenset({".portal_secret", ".portal_metrics_token", "connection.json"})
MAX_LISTED = 1000


class BadPath(ValueError):
    """A path that does not name something inside a job's work directory."""


@dataclass(frozen=True)
class DirEntry:
    name: str
    kind: str  # "dir", "file" or what else it is ("a symbolic link", "a FIFO", ...)
    size: int
    modified: datetime | None


def work_path_parts(rel: str) -> list[str]:
    """'a/b' -> ['a', 'b']; refuses anything that could leave the directory or is not a
    plain name ('..', absolute, NUL, over-long), and the portal's private files."""
    parts = [p for p in (rel or "").split("/") if p not in ("", ".")]
    if len(parts) > 32 or len(rel or "") > 4096:
        raise BadPath("That path is too deep.")
    for part in parts:
        if part == ".." or "\x00" in part or len(part.encode()) > 255:
            raise BadPath("Not a path inside the job's work directory.")
    if parts and parts[0] in PRIVATE_FILES:
        raise BadPath("That is one of the portal's private files.")
    return parts


def _walk_to(sftp, work_dir: str, parts: list[str]) -> str:
    """The path of ``parts`` under ``work_dir``, every directory on the way lstat'd: a link
    anywhere (the job's to make) could lead out of the work directory."""
    path = work_dir
    for part in parts[:-1]:
        path = f"{path}/{part}"
        if not stat.S_ISDIR(sftp.lstat(path).st_mode or 0):
            raise BadPath(f"{part} is not a directory.")
    return f"{path}/{parts[-1]}" if parts else path


def list_work_dir(conn: ssh.Connection, work_dir: str, rel: str) -> tuple[list[DirEntry], int]:
    """The entries of a directory in a job's work directory (links and FIFOs are shown for
    what they are, never followed), directories first, by name, at most MAX_LISTED; and
    how many there are in all."""
    parts = work_path_parts(rel)
    with conn.sftp_session() as sftp:
        path = _walk_to(sftp, work_dir, parts)
        if parts and not stat.S_ISDIR(sftp.lstat(path).st_mode or 0):
            raise BadPath(f"{parts[-1]} is not a directory.")
        attrs = sftp.listdir_attr(path)  # OpenSSH's sftp-server reports lstat() here
    entries = []
    for a in attrs:
        if not parts and a.filename in PRIVATE_FILES:
            continue
        mode = a.st_mode or 0
        kind = (
            "dir"
            if stat.S_ISDIR(mode)
            else "file"
            if stat.S_ISREG(mode)
            else _FILE_KINDS.get(stat.S_IFMT(mode), "not a regular file")
        )
        modified = datetime.fromtimestamp(a.st_mtime, tz=UTC) if a.st_mtime else None
        entries.append(DirEntry(a.filename, kind, a.st_size or 0, modified))
    entries.sort(key=lambda e: (e.kind != "dir", e.name))
    return entries[:MAX_LISTED], len(entries)


def work_file_size(conn: ssh.Connection, work_dir: str, rel: str) -> tuple[str, int]:
    """(path, size) of a regular file in a job's work directory, for a download."""
    parts = work_path_parts(rel)
    if not parts:
        raise BadPath("Choose a file.")
    with conn.sftp_session() as sftp:
        path = _walk_to(sftp, work_dir, parts)
        attrs = sftp.lstat(path)
    _check_regular(path, attrs)
    return path, attrs.st_size or 0


# Checks that what a catalog image needs is on the cluster's login node. Arguments: a
# nonce that marks the answer lines, then three per image: the runtime's command ('' for
# the host), the image location, and its modules one per line.
_CHECK_IMAGES = r"""
nonce=$1; shift
i=0
modules_ready=
say() { printf '%s %s %s %s\n' "$nonce" "$i" "$1" "$2"; }
while [ $# -ge 3 ]; do
    runtime=$1 location=$2 modules=$3
    shift 3
    if [ -n "$runtime" ]; then
        if found=$(command -v -- "$runtime" 2>/dev/null); then
            say ok "$runtime is installed ($found)"
        else
            say fail "$runtime is not installed on the login node (not on PATH)"
        fi
    fi
    case $location in
        /*)
            if [ -f "$location" ] && [ -r "$location" ]; then
                say ok "image file $location is there ($(stat -L -c %s -- "$location") bytes)"
            elif [ -e "$location" ]; then
                say fail "$location is there but is not a readable file"
            else
                say fail "image file $location is missing"
            fi ;;
        '') ;;
        *) say note "$location is pulled when a job starts; not checked here" ;;
    esac
    if [ -n "$modules" ]; then
        if [ -z "$modules_ready" ]; then
__MODULE_INIT__
            modules_ready=yes
        fi
        if ! command -v module >/dev/null 2>&1; then
            say fail "the module command is not available (neither Lmod nor Environment Modules is set up)"
        else
            while IFS= read -r m; do
                if module is-avail "$m" >/dev/null 2>&1; then
                    say ok "module $m is available"
                else
                    say fail "module $m is not available"
                fi
            done <<< "$modules"
        fi
    fi
    i=$((i + 1))
done
"""


def check_images(conn: ssh.Connection, images) -> list[list[parsers.CheckFinding]]:
    """What each image needs (runtime, image file, modules), checked on the login node
    in one command; findings per image, in order."""
    from jobs.slurm.scripts import MODULE_INIT  # scripts needs the models; this module not

    nonce = secrets.token_hex(8)
    script = _CHECK_IMAGES.replace("__MODULE_INIT__", MODULE_INIT)
    argv = ["bash", "-c", script, "portal-check", nonce]
    for image in images:
        argv += [
            "" if image.runtime == "none" else image.runtime,  # runtimes are named by their command
            image.location,
            "\n".join(image.module_list),
        ]
    result = conn.run(argv, check=False, max_bytes=256 * 1024)
    found = parsers.parse_image_check(result.stdout, nonce, len(images))
    if result.exit_status != 0 and not any(found):
        raise ssh.CommandFailed(
            result.stderr.strip()[-500:] or f"the check stopped with status {result.exit_status}"
        )
    return found
