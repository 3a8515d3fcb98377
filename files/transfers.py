"""Transfers between a person's folders on a cluster and a remote: rclone started on the
cluster's login node as the person (never a service account), detached in a state folder
of their own (``<home>/.portal/transfers/<id>-<random>``), watched from its JSON log and
stopped by its process group. files/rclone.py is what runs and what its log says; here is
what the portal does over SSH, each step with the task's deadline (clusters/deadline.py).

What comes back is written by the person's processes: the log is read as a bounded tail
of a regular file (never a link or a FIFO), each line as data; the pid and the exit
status must be small numbers. A transfer reaches its true end whatever is lost on the
way: the launch is idempotent (a retried start finds ``launched`` and starts nothing),
every look is a fresh read of the cluster, and the beat's sweep looks again at every
transfer that is not over.
"""

from __future__ import annotations

import logging
import secrets
import stat
from dataclasses import dataclass

from django.db import transaction
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils import timezone

from clusters import files as job_files
from clusters import pool, ssh
from common import paths
from common.choices import WorkDir
from files import rclone, remote
from files.models import Remote, Transfer
from identity import audit
from projects import roots

log = logging.getLogger(__name__)

LOG_TAIL = 64 * 1024
SMALL = 256
LAUNCH_TIMEOUT = 30.0


class Refused(ValueError):
    """A transfer that cannot be asked for (a sentence for the person)."""


def remotes_for(user, cluster=None):
    """The remotes a person may use: their own and the site's (on ``cluster``, if given)."""
    from django.db.models import Q

    mine_or_site = Q(owner=user) | Q(owner=None)
    queryset = Remote.objects.filter(mine_or_site)
    if cluster is not None:
        queryset = queryset.filter(Q(cluster=None) | Q(cluster=cluster))
    return queryset.order_by("owner_id", "name")


def transfers_of(user):
    """The one rule for transfers: a person sees and stops only their own."""
    return Transfer.objects.filter(owner=user)


@transaction.atomic
def ask(
    user,
    cluster,
    remote_obj: Remote,
    direction: str,
    root_key: str,
    folder: str,
    remote_path_text: str,
) -> Transfer:
    """A new transfer, queued (its start is a task: files.tasks.start_soon). Refused with a sentence when the
    person has no such root, the folder's path leaves it, the root is read-only for a copy
    into it, or the remote is not theirs to use."""
    if direction not in Transfer.Direction.values:
        raise Refused("Choose a direction.")
    try:
        account = roots.account_for(cluster, user)
        root = roots.root_named(cluster, account, root_key)
    except roots.NoAccess as exc:
        raise Refused(str(exc)) from None
    if direction == Transfer.Direction.FROM_REMOTE and root.read_only:
        raise Refused("That project folder is read-only for you: copy into your own folders.")
    if not remotes_for(user, cluster).filter(pk=remote_obj.pk).exists():
        raise Refused("That remote is not one you can use on this cluster.")
    try:
        parts = paths.parts_of(folder)
        if direction == Transfer.Direction.FROM_REMOTE:
            for part in parts:
                paths.new_name(part)  # it may be made: a name the portal makes
        where = rclone.remote_path(remote_path_text)
    except (paths.BadPath, rclone.BadRemote) as exc:
        raise Refused(str(exc)) from None
    transfer = Transfer.objects.create(
        owner=user,
        cluster=cluster,
        remote=remote_obj,
        remote_name=remote_obj.name,
        direction=direction,
        root=root.key,
        folder=paths.joined(parts),
        remote_path=where,
    )
    transfer.note(f"Asked for: {describe(transfer)}.")
    return transfer


def describe(transfer: Transfer) -> str:
    here = f"{transfer.root}:{paths.shown(transfer.folder, 200) or '.'}"
    there = f"{transfer.remote_name}:{paths.shown(transfer.remote_path, 200)}"
    if transfer.direction == Transfer.Direction.TO_REMOTE:
        return f"copy {here} to {there}"
    return f"copy {there} to {here}"


# --- on the cluster -----------------------------------------------------------------------


def _place(transfer: Transfer):
    account = roots.account_for(transfer.cluster, transfer.owner)
    root = roots.root_named(transfer.cluster, account, transfer.root)
    return account, root


def _state_dir(sftp, home: str, transfer: Transfer) -> str:
    """The transfer's private folder under the person's home (made 0700 on the way)."""
    name = f"{transfer.pk}-{secrets.token_hex(5)}"
    path = remote.make_folders(sftp, home, [".portal", "transfers", name])
    sftp.chmod(path, 0o700)
    return path


def _source(sftp, root: str, parts: list[str]) -> str:
    """What a copy to a remote reads: a folder or a regular file inside the root, reached
    without a link (rclone, as the person, then skips links inside it: its default)."""
    path = remote.walk(sftp, root, parts)
    if parts:
        mode = sftp.lstat(path).st_mode or 0
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            kind = "a link" if stat.S_ISLNK(mode) else "not a regular file or a folder"
            raise paths.BadPath(f"{paths.shown(parts[-1], 100)} is {kind}: it is not copied.")
    return path


def _write_private(sftp, path: str, text: str) -> None:
    with sftp.open(path, "w") as handle:
        handle.chmod(0o600)
        handle.write(text.encode())


def start(transfer: Transfer) -> None:
    """Launch rclone for a queued transfer (a task; safe to run twice)."""
    if transfer.state != Transfer.State.QUEUED:
        return
    if transfer.remote is None:
        _end(transfer, Transfer.State.FAILED, "Its remote was removed before it started.")
        return
    try:
        account, root = _place(transfer)
    except roots.NoAccess as exc:
        _end(transfer, Transfer.State.FAILED, str(exc))
        return
    cluster = transfer.cluster
    parts = paths.parts_of(transfer.folder)
    config = transfer.remote.config_text()
    flags = cluster.transfer_flags.split()

    def launch(conn: ssh.Connection) -> tuple[str, str]:
        with conn.sftp_session() as sftp:
            home = cluster.work_dir_root(WorkDir.HOME, account.username)
            if transfer.direction == Transfer.Direction.TO_REMOTE:
                local = _source(sftp, root.path, parts)
            else:
                local = remote.make_folders(sftp, root.path, parts)
            if not transfer.state_dir:
                transfer.state_dir = _state_dir(sftp, home, transfer)
                Transfer.objects.filter(pk=transfer.pk).update(state_dir=transfer.state_dir)
            state_dir = transfer.state_dir
            _write_private(sftp, f"{state_dir}/{rclone.CONF}", config)
        there = f"{rclone.SECTION}:{transfer.remote_path}"
        source, destination = (
            (local, there) if transfer.direction == Transfer.Direction.TO_REMOTE else (there, local)
        )
        argv = rclone.command(cluster.rclone_command, source, destination, flags)
        conn.run_script(rclone.launch_script(state_dir, argv), timeout=LAUNCH_TIMEOUT)
        return state_dir, local

    try:
        with audit.action(
            audit.Action.TRANSFER_START,
            user=transfer.owner,
            account=account,
            target=f"{transfer.pk}: {describe(transfer)}",
        ):
            state_dir, local = pool.with_connection(account, launch)
    except (paths.BadPath, job_files.NotARegularFile) as exc:
        _end(transfer, Transfer.State.FAILED, f"Not started: {exc}")
        return
    except FileNotFoundError:
        _end(transfer, Transfer.State.FAILED, "Not started: that folder does not exist.")
        return
    except PermissionError:
        _end(transfer, Transfer.State.FAILED, "Not started: permission denied on the cluster.")
        return
    changed = Transfer.objects.filter(pk=transfer.pk, state=Transfer.State.QUEUED).update(
        state=Transfer.State.RUNNING, state_dir=state_dir, started_at=timezone.now()
    )
    if changed:
        transfer.note(f"Started on {cluster.name} as {account.username}.")


@dataclass
class Look:
    progress: rclone.Progress
    status: int | None  # rclone's exit status, once it has one
    pid: int | None
    host: str
    stderr: bytes


def _read(sftp, path: str, max_bytes: int, *, tail: bool) -> tuple[bytes, bool]:
    """(bytes, cut): at most ``max_bytes`` of a regular file, its end if ``tail``
    (b"" when missing; never a link, FIFO or device)."""
    try:
        with job_files.open_regular(sftp, path) as (handle, size):
            start = max(0, size - max_bytes) if tail else 0
            handle.seek(start)
            return handle.read(min(size, max_bytes)), start > 0
    except FileNotFoundError:
        return b"", False


def look(conn: ssh.Connection, state_dir: str) -> Look:
    with conn.sftp_session() as sftp:
        data, cut = _read(sftp, f"{state_dir}/{rclone.LOG}", LOG_TAIL, tail=True)
        status = rclone.parse_status(_read(sftp, f"{state_dir}/{rclone.RC}", SMALL, tail=False)[0])
        pid = rclone.parse_pid(_read(sftp, f"{state_dir}/{rclone.PID}", SMALL, tail=False)[0])
        host = rclone.parse_host(_read(sftp, f"{state_dir}/{rclone.HOST}", SMALL, tail=False)[0])
        stderr = b""
        if status not in (None, 0):
            stderr = _read(sftp, f"{state_dir}/{rclone.ERR}", 4096, tail=True)[0]
    return Look(rclone.read_log(data, cut=cut), status, pid, host, stderr)


def _alive(conn: ssh.Connection, pid: int | None, host: str) -> str:
    if pid is None or not host:
        return "unknown"
    result = conn.run_script(rclone.alive_script(pid, host), timeout=15, check=False)
    word = result.stdout.strip() if isinstance(result.stdout, str) else ""
    return word if word in ("alive", "gone", "elsewhere") else "unknown"


# A transfer whose wrapper is gone without an exit status (its node rebooted, it was
# killed with -9), or that never wrote a pid, ends as failed after this long.
LOST_AFTER = 120


def poll(transfer: Transfer) -> None:
    """Look at a running transfer once: its progress; its end when rclone has ended."""
    if transfer.state != Transfer.State.RUNNING or not transfer.state_dir:
        return
    try:
        account, _root = _place(transfer)
    except roots.NoAccess as exc:
        _end(transfer, Transfer.State.FAILED, str(exc))
        return

    def on(conn: ssh.Connection) -> tuple[Look, str]:
        seen = look(conn, transfer.state_dir)
        alive = "ended" if seen.status is not None else _alive(conn, seen.pid, seen.host)
        return seen, alive

    seen, alive = pool.with_connection(account, on)
    p = seen.progress
    now = timezone.now()
    Transfer.objects.filter(pk=transfer.pk, state=Transfer.State.RUNNING).update(
        bytes=p.bytes,
        total_bytes=p.total_bytes,
        files_done=p.files,
        total_files=p.total_files,
        errors=p.errors,
        speed=p.speed,
        eta=p.eta,
        polled_at=now,
    )
    transfer.refresh_from_db()
    if seen.status is not None:
        _ended(transfer, account, seen)
    elif alive == "gone" or (
        alive == "unknown"
        and transfer.started_at
        and (now - transfer.started_at).total_seconds() > LOST_AFTER
    ):
        # Read once more: it may have written its status between the two reads.
        again = pool.with_connection(account, lambda conn: look(conn, transfer.state_dir))
        if again.status is not None:
            _ended(transfer, account, again)
        elif transfer.cancel_requested_at:
            _finish(transfer, account, Transfer.State.CANCELLED, "Cancelled.")
        else:
            _finish(
                transfer, account, Transfer.State.FAILED, "rclone stopped without an exit status."
            )


def _ended(transfer: Transfer, account, seen: Look) -> None:
    status = seen.status
    p = seen.progress
    if status == 0:
        text = f"Copied {p.files:,} files, {filesizeformat(p.bytes)}"
        if p.elapsed:
            text += f" in {p.elapsed:.0f} s"
        _finish(transfer, account, Transfer.State.DONE, text + ".", status)
    elif status == rclone.STOPPED and transfer.cancel_requested_at:
        _finish(
            transfer,
            account,
            Transfer.State.CANCELLED,
            f"Cancelled after {p.files:,} files, {filesizeformat(p.bytes)}.",
            status,
        )
    else:
        reason = p.last_error or rclone.first_error(seen.stderr) or p.last_plain
        text = rclone.exit_meaning(status or 0)
        _finish(
            transfer,
            account,
            Transfer.State.FAILED,
            f"{text[:1].upper()}{text[1:]}" + (f": {reason}" if reason else "."),
            status,
        )


def _finish(transfer: Transfer, account, state: str, message: str, status=None) -> None:
    """Its end, once (a conditional update), its state folder removed, its person told."""
    _end(transfer, state, message, status)
    if transfer.state_dir:
        try:
            pool.with_connection(account, lambda conn: _clean(conn, transfer.state_dir))
        except (ssh.ClusterError, OSError) as exc:
            log.info("could not remove transfer %s's state folder: %s", transfer.pk, exc)


def _clean(conn: ssh.Connection, state_dir: str) -> None:
    """Remove the portal's files from the state folder (the config first: it holds a
    secret), then the folder if nothing else is in it. Only the names the portal wrote."""
    with conn.sftp_session() as sftp:
        for name in rclone.STATE_FILES:
            try:
                attrs = sftp.lstat(f"{state_dir}/{name}")
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(attrs.st_mode or 0):
                sftp.remove(f"{state_dir}/{name}")
        for name in (rclone.LAUNCHED, ""):
            try:
                sftp.rmdir(f"{state_dir}/{name}".rstrip("/"))
            except OSError:
                pass


def _end(transfer: Transfer, state: str, message: str, status=None) -> bool:
    changed = Transfer.objects.filter(pk=transfer.pk, state__in=Transfer.ACTIVE).update(
        state=state, message=message[:500], ended_at=timezone.now(), exit_status=status
    )
    if not changed:
        return False
    transfer.refresh_from_db()
    transfer.note(message)
    tell(transfer)
    return True


def tell(transfer: Transfer) -> None:
    """Its person is told of its end (done or failed; not a cancel of their own), once."""
    from notifications.events import Event, Message
    from notifications.models import Notification
    from notifications.tasks import told

    if transfer.state == Transfer.State.CANCELLED:
        return
    if not Transfer.objects.filter(pk=transfer.pk, told_at=None).update(told_at=timezone.now()):
        return
    event = Event.TRANSFER_DONE if transfer.state == Transfer.State.DONE else Event.TRANSFER_FAILED
    verb = "finished" if transfer.state == Transfer.State.DONE else "failed"
    text = f"Your transfer on {transfer.cluster.name} ({describe(transfer)}) {verb}: "
    text += transfer.message
    message = Message(text[:400])
    url = reverse("transfer-detail", args=[transfer.pk])
    told(Notification.record(transfer.owner, event, message, url))


def cancel(transfer: Transfer, by) -> None:
    """Stop a transfer: a queued one at once; a running one's process group on the
    cluster (its end is then seen by the next look)."""
    now = timezone.now()
    Transfer.objects.filter(pk=transfer.pk, cancel_requested_at=None).update(
        cancel_requested_at=now
    )
    transfer.refresh_from_db()
    if transfer.state == Transfer.State.QUEUED and not transfer.state_dir:
        _end(transfer, Transfer.State.CANCELLED, "Cancelled before it started.")
        return
    if transfer.is_final:
        return
    transfer.note(f"Cancel asked by {by.get_username()}.")
    account, _root = _place(transfer)

    def stop(conn: ssh.Connection) -> None:
        seen = look(conn, transfer.state_dir)
        if seen.pid is not None and seen.status is None:
            conn.run_script(rclone.stop_script(seen.pid), timeout=15, check=False)

    with audit.action(
        audit.Action.TRANSFER_CANCEL,
        user=by,
        account=account,
        target=f"{transfer.pk}: {describe(transfer)}",
    ):
        pool.with_connection(account, stop)
    poll(transfer)
