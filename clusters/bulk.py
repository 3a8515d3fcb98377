"""Bulk bytes over OpenSSH: the bytes of an upload written on the cluster by OpenSSH's
own client, while paramiko (clusters/ssh.py) keeps doing everything else.

Why: paramiko's SFTP writes a GiB from memory at 200-229 MB/s and spends 2.65-3.1
CPU-seconds of the web worker on it, in Python; the same bytes piped into an OpenSSH
client go at 292-301 MB/s for 0.35 s of the worker's CPU (scp: 285-335 MB/s). So a
person's upload requests into one root (one ``acting`` purpose) share one OpenSSH
ControlMaster, and each request's bytes go through a multiplexed client running GNU dd
on the cluster: it writes stdin at a byte offset into the upload's partial file, never
truncating it, never creating it, never following a link in its last name (paramiko
has walked the folders and checked the file's size just before).

The master logs in as paramiko would: the account's key (in certificate mode a fresh
key and certificate naming who and what for, as ``ssh.account_key`` makes them), the
cluster's pinned host key the only one known, no ssh_config, no agent. The key and the
certificate are written into a private directory under ``PORTAL_BULK_SSH_DIR``
(/dev/shm: memory) and removed as soon as the master has logged in; only its control
socket stays, which ssh removes as it ends (a directory left by a worker killed outright
is removed by the next master's start). A master dies with its web worker
(PR_SET_PDEATHSIG), is closed after ``PORTAL_BULK_SSH_IDLE`` seconds unused and at
exit, replaced when its certificate is about to expire or it died, and a process keeps
at most ``PORTAL_BULK_SSH_MASTERS`` of them (the least recently used idle one goes
first: clusters/masters.py).

``Unavailable``: OpenSSH cannot carry these bytes now (no ssh, a pin OpenSSH cannot
check, a master that would not start); the caller writes them over paramiko. A host key
OpenSSH refuses is ``ssh.HostKeyMismatch``, never a reason to try another way.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import functools
import logging
import os
import queue
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from clusters import acting, certs, deadline, files, masters, openssh, pool, signer, ssh

log = logging.getLogger(__name__)

STDERR_MAX = 2000  # characters of ssh's or dd's message kept, as data
PIPE_BYTES = 1024 * 1024  # the pipe into ssh (Linux' default is 64 KiB)
STALE_SECONDS = 600  # a master's directory with no socket this old is a leftover
# What ssh says when the host key is not the pinned one (StrictHostKeyChecking=yes).
HOST_KEY_REFUSED = (
    "Host key verification failed",
    "REMOTE HOST IDENTIFICATION HAS CHANGED",
    "host key is known for",
)
# What this process did over OpenSSH; tests read it.
counters = {"masters": 0, "writes": 0, "reads": 0}


class Unavailable(ssh.ClusterError):
    """OpenSSH cannot carry the bytes now: write them over paramiko instead."""


def enabled() -> bool:
    return settings.PORTAL_BULK_TRANSPORT == "openssh"


def runtime_dir() -> str:
    """Where a master's private directory is made: memory (/dev/shm) where writable."""
    configured = settings.PORTAL_BULK_SSH_DIR
    if configured:
        return configured
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):
        return "/dev/shm"
    return tempfile.gettempdir()


def _bounded(data: bytes) -> str:
    return data.decode(errors="replace").strip()[:STDERR_MAX]


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn: the child gets SIGTERM when the thread that started it ends (Linux)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent ended before that: end too
            os._exit(1)

    return preexec


class _Launcher:
    """The one thread of this process that starts masters and sweeps idle ones.
    PR_SET_PDEATHSIG fires when the *thread* that forked ends, and a web server's request
    threads come and go: masters are started from this thread, which lasts as long as the
    process."""

    def __init__(self) -> None:
        self.queue: queue.Queue = queue.Queue()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def popen(self, argv: list[str], **options: Any) -> subprocess.Popen:
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="bulk-ssh", daemon=True)
                self.thread.start()
        done: Future = Future()
        self.queue.put((argv, options, done))
        try:
            return done.result(timeout=30)
        except TimeoutError:
            done.cancel()  # (never started later, with nobody to close it)
            raise

    def _loop(self) -> None:
        swept = time.monotonic()
        while True:
            interval = min(5.0, max(0.5, settings.PORTAL_BULK_SSH_IDLE / 4))
            try:
                argv, options, done = self.queue.get(timeout=interval)
            except queue.Empty:
                pass
            else:
                if done.set_running_or_notify_cancel():
                    try:
                        process = subprocess.Popen(  # noqa: S603 (ssh, argv from openssh.py)
                            argv, preexec_fn=_die_with_parent(), **options
                        )
                    except BaseException as exc:  # noqa: BLE001 - handed to the caller
                        done.set_exception(exc)
                    else:
                        done.set_result(process)
            if time.monotonic() - swept >= interval:
                swept = time.monotonic()
                try:
                    _registry.sweep()
                except Exception:  # noqa: BLE001 - the next sweep tries again
                    log.exception("closing idle OpenSSH masters failed")


@dataclass
class Master:
    process: subprocess.Popen
    directory: str
    argv_for: Callable[[str], list[str]]  # a multiplexed client's argv for a command
    key_id: str
    expires_at: float | None

    @property
    def control(self) -> str:
        return f"{self.directory}/ctl"

    def alive(self) -> bool:
        return self.process.poll() is None and os.path.exists(self.control)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def _write_private(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def _failed_to_start(where: str, message: str) -> ssh.ClusterError:
    if any(words in message for words in HOST_KEY_REFUSED):
        return ssh.HostKeyMismatch(
            f"OpenSSH refused the host key of {where}: it is not the key pinned for this "
            f"cluster. Refusing to connect. ({message})",
            stderr=message,
        )
    return Unavailable(f"OpenSSH could not log in to {where}: {message or 'no message'}")


def start_master(account) -> Master:
    """A master logged in as ``account`` (see the module's doc); Unavailable when it does
    not come up, HostKeyMismatch when OpenSSH refuses the host key."""
    try:
        return _start(account)
    except OSError as exc:  # this host's side: no runtime directory, no room, no process
        raise Unavailable(f"OpenSSH cannot be started here: {exc}") from None


@functools.cache
def _cpuinfo() -> str:
    """This host's /proc/cpuinfo ("" where there is none: OpenSSH's own cipher order)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            return fh.read(1 << 20)
    except OSError:
        return ""


def _start(account) -> Master:
    cluster = account.cluster
    host, port, user = cluster.ssh_host, cluster.ssh_port, account.username
    where = f"{user}@{host}:{port}"
    ssh_path = shutil.which("ssh")
    if not ssh_path:
        raise Unavailable("no OpenSSH client (ssh) on this host")
    try:
        line = openssh.known_hosts_line(host, port, cluster.host_key)
    except openssh.Unusable as exc:
        raise Unavailable(str(exc)) from None
    pkey = ssh.account_key(account)  # (its refusals are paramiko's too: they stay theirs)
    cert = certs.certificate_of(pkey)
    _remove_stale(runtime_dir())
    directory = tempfile.mkdtemp(prefix="bulk-", dir=runtime_dir())  # 0700
    key, cert_file, known = f"{directory}/key", f"{directory}/key-cert.pub", f"{directory}/kh"
    try:
        _write_private(key, openssh.private_key_text(pkey))
        certificate = openssh.certificate_line(pkey)
        if certificate:
            _write_private(cert_file, certificate)
        _write_private(known, line)
        argv = openssh.master_argv(
            ssh_path,
            f"{directory}/ctl",
            key,
            cert_file if certificate else None,
            known,
            host,
            port,
            user,
            connect_timeout=settings.SSH_CONNECT_TIMEOUT,
            keepalive=settings.SSH_KEEPALIVE_INTERVAL,
            ciphers=openssh.ciphers(settings.PORTAL_BULK_SSH_CIPHERS, _cpuinfo()),
        )
        with open(f"{directory}/log", "wb") as errors:
            process = _launcher.popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                env=_environment(),
            )
        master = Master(
            process,
            directory,
            lambda command: openssh.client_argv(
                ssh_path, f"{directory}/ctl", "/dev/null", host, port, user, command
            ),
            cert.key_id.decode(errors="replace") if cert else "",
            float(cert.valid_before) if cert else None,
        )
        try:
            _wait_until_up(
                master, openssh.check_argv(ssh_path, master.control, host, port, user), where
            )
        except BaseException:
            master.close()
            raise
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    finally:  # logged in (or not): the key and certificate are of no more use
        for path in (key, cert_file):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    # Nor is the rest to anyone but the master (it has its log open; a multiplexed client
    # checks no host key): only its socket stays, which ssh removes as it ends, however
    # it ends.
    for path in (known, f"{directory}/log"):
        os.unlink(path)
    counters["masters"] += 1
    log.info("OpenSSH master for %s up (%s)", where, master.key_id or "stored key")
    return master


def _remove_stale(parent: str) -> None:
    """The directories of this user's masters whose process ended without closing them
    (a worker killed outright: PR_SET_PDEATHSIG ends the master, nothing removes its
    directory): no socket, and older than any login takes."""
    too_old = time.time() - STALE_SECONDS
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            try:
                if not (entry.name.startswith("bulk-") and entry.is_dir(follow_symlinks=False)):
                    continue
                info = entry.stat(follow_symlinks=False)
                if info.st_uid != os.geteuid() or info.st_mtime > too_old:
                    continue
                if not os.path.lexists(f"{entry.path}/ctl"):
                    shutil.rmtree(entry.path, ignore_errors=True)
            except OSError:
                continue


def _wait_until_up(master: Master, check: list[str], where: str) -> None:
    """Polls until the master answers on its socket, it ended, or the time is up."""
    limit = deadline.cap(settings.SSH_CONNECT_TIMEOUT + 30)
    until = time.monotonic() + limit
    pause = 0.005
    while True:
        if master.process.poll() is not None:
            with open(f"{master.directory}/log", "rb") as fh:
                raise _failed_to_start(where, _bounded(fh.read(STDERR_MAX * 2)))
        if os.path.exists(master.control):
            with contextlib.suppress(subprocess.TimeoutExpired):  # (then the deadline says)
                done = subprocess.run(  # noqa: S603 (ssh, its arguments built by openssh.py)
                    check,
                    capture_output=True,
                    timeout=max(1.0, until - time.monotonic()),
                    env=_environment(),
                )
                if done.returncode == 0:
                    return
        if time.monotonic() >= until:
            raise Unavailable(f"OpenSSH did not log in to {where} within {limit:.0f} s")
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def _environment() -> dict[str, str]:
    """Nothing of the web worker's environment but PATH (no agent socket, no locale)."""
    return {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C"}


def _slot_key(account, requester: str, purpose: str) -> tuple:
    """Whose master: one per account, requester and purpose (its certificate names them)."""
    return (account.pk, requester, purpose)


# --- writing ------------------------------------------------------------------------


def write_at(account, path: str, offset: int, pieces: Iterable[bytes], *, timeout: float) -> int:
    """Write ``pieces`` into ``path`` from byte ``offset`` through the master of
    ``account`` for the current ``acting`` requester and purpose (the key id of its
    certificate names them, and ``acting.key_id`` is set to it). ``path``'s size must be
    ``offset`` (checked by the caller over SFTP). Each piece is handed over as the
    cluster takes it: ``timeout`` seconds at most for each, and again for dd to end.
    A body cut short ends ``pieces`` early: what arrived is written. Returns the new
    size; ClusterError with dd's or ssh's message otherwise (Unavailable before any
    byte is taken, when the master does not come up)."""
    if stale := signer.stale_refusal(account, acting.requester.get()):
        raise ssh.AuthenticationFailed(stale)
    try:
        config = pool.config_key(account)
    except certs.CAMissing as exc:
        raise ssh.AuthenticationFailed(str(exc)) from None
    command = openssh.writer_command(path, offset)
    try:
        key = _slot_key(account, acting.requester.get(), acting.purpose.get())
        with _registry.using(key, config, lambda: start_master(account)) as master:
            acting.key_id.set(master.key_id)
            return offset + _send(master, command, pieces, timeout)
    except masters.Full as exc:  # (only ever before the block: no byte taken)
        raise Unavailable(str(exc)) from None


def _send(master: Master, command: str, pieces: Iterable[bytes], timeout: float) -> int:
    counters["writes"] += 1
    with _dd(master, command, timeout, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL) as dd:
        sent, failure = _feed(dd, pieces, timeout)
    if failure is not None:
        raise failure  # the body's own error, after what arrived was written
    return sent


@contextlib.contextmanager
def _dd(master: Master, command: str, timeout: float, **stdio: Any) -> Iterator[subprocess.Popen]:
    """``command`` (dd) on the cluster through ``master``'s multiplexed client, while the
    block feeds or drains it; then its end, waited for at most ``timeout`` seconds, and a
    ClusterError for anything but success. A block left early (the client went, an error)
    kills the client, which ends dd on the cluster."""
    with tempfile.TemporaryFile(dir=master.directory) as errors:
        try:
            process = subprocess.Popen(  # noqa: S603 (ssh, its arguments built by openssh.py)
                master.argv_for(command),
                stderr=errors,
                env=_environment(),
                bufsize=0,
                **stdio,
            )
        except OSError as exc:  # (its directory gone, no process left: not the cluster's)
            raise ssh.ClusterUnreachable(f"OpenSSH's client did not start: {exc}") from None
        try:
            yield process
            status = process.wait(timeout=max(0.1, deadline.cap(timeout)))
        except subprocess.TimeoutExpired:
            raise ssh.CommandTimedOut(
                f"dd on the cluster did not end within {timeout:.0f} s of its last byte.",
                seconds=timeout,
                command=command,
            ) from None
        finally:
            if process.poll() is None:  # a timeout, or an interruption: nothing left running
                process.kill()
                process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    with contextlib.suppress(BrokenPipeError):
                        stream.close()
        errors.seek(0)
        message = _bounded(errors.read(STDERR_MAX * 2))
    if status == 0:
        return
    if status == 255:  # ssh's own failure: the master is gone or the connection broke
        raise ssh.ClusterUnreachable(f"OpenSSH lost the cluster: {message or 'no message'}")
    if "symbolic links" in message or "No such device" in message:
        raise files.NotARegularFile("The file is not a regular file any more.", stderr=message)
    raise ssh.CommandFailed(
        f"dd on the cluster failed: {message or f'exit status {status}'}",
        command=command,
        stderr=message,
        exit_status=status,
    )


def _feed(
    process: subprocess.Popen, pieces: Iterable[bytes], timeout: float
) -> tuple[int, Exception | None]:
    """Hand ``pieces`` to the client's stdin, then close it: (bytes sent, the error the
    pieces raised, if any: what came before it is still written)."""
    stdin = process.stdin
    assert stdin is not None
    fd, sent, failure = stdin.fileno(), 0, None
    with contextlib.suppress(OSError, AttributeError):  # (Linux; else only more wake-ups)
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    os.set_blocking(fd, False)
    iterator = iter(pieces)
    try:
        while True:
            try:
                piece = next(iterator)
            except StopIteration:
                break
            except Exception as exc:  # noqa: BLE001 - the request's body broke off
                failure = exc
                break
            _write_all(fd, piece, timeout)
            sent += len(piece)
    except BrokenPipeError:  # dd ended early: its status says why
        pass
    finally:
        with contextlib.suppress(BrokenPipeError):
            stdin.close()
    return sent, failure


def _write_all(fd: int, data: bytes, timeout: float) -> None:
    """All of ``data`` into the pipe: each wait for room at most ``timeout`` seconds."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
            continue
        except BlockingIOError:
            pass
        limit = deadline.cap(timeout)
        room = select.poll()  # (not select(): a busy worker's descriptors pass 1024)
        room.register(fd, select.POLLOUT)
        if limit <= 0 or not room.poll(limit * 1000):
            raise ssh.CommandTimedOut(
                f"The cluster took no bytes for {limit:.0f} s.", seconds=limit
            )


# --- reading ------------------------------------------------------------------------


def read_range(
    account,
    path: str,
    first: int,
    end: int,
    piece: int,
    *,
    timeout: float,
    requester: str,
    purpose: str,
) -> Iterator[bytes]:
    """Bytes ``first`` to ``end`` (excluded) of ``path`` (a regular file, checked by the
    caller over SFTP), read by dd on the cluster through the master of ``account`` for
    ``requester`` and ``purpose`` (a download runs after its view and its audit row: they
    are named here rather than taken from ``acting``), in pieces of at most ``piece``
    bytes as they come (fewer in all where the file is shorter now). ``timeout``: the
    longest wait for the next bytes. Closing the iterator early (the client went) stops
    dd. Unavailable before the first byte when no master comes up; ClusterError after
    dd's end otherwise."""
    if stale := signer.stale_refusal(account, requester):
        raise ssh.AuthenticationFailed(stale)
    try:
        config = pool.config_key(account)
    except certs.CAMissing as exc:
        raise ssh.AuthenticationFailed(str(exc)) from None
    command = openssh.reader_command(path, first, end - first)

    def start() -> Master:
        # (a generator's context is its consumer's: set for the login, then as it was)
        tokens = acting.requester.set(requester), acting.purpose.set(purpose)
        try:
            return start_master(account)
        finally:
            acting.purpose.reset(tokens[1])
            acting.requester.reset(tokens[0])

    with contextlib.ExitStack() as held:
        try:
            master = held.enter_context(
                _registry.using(_slot_key(account, requester, purpose), config, start)
            )
        except masters.Full as exc:
            raise Unavailable(str(exc)) from None
        yield from _receive(master, command, piece, timeout)


def _receive(master: Master, command: str, piece: int, timeout: float) -> Iterator[bytes]:
    counters["reads"] += 1
    with _dd(master, command, timeout, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE) as dd:
        assert dd.stdout is not None
        fd = dd.stdout.fileno()
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        os.set_blocking(fd, False)
        ready = select.poll()
        ready.register(fd, select.POLLIN)
        held: list[bytes] = []
        size = 0
        while True:
            try:
                data = os.read(fd, piece - size)
            except BlockingIOError:
                limit = deadline.cap(timeout)
                if limit <= 0 or not ready.poll(limit * 1000):
                    raise ssh.CommandTimedOut(
                        f"The cluster sent no bytes for {limit:.0f} s.", seconds=limit
                    ) from None
                continue
            if not data:
                break
            held.append(data)
            size += len(data)
            if size >= piece:
                yield b"".join(held)
                held, size = [], 0
        if held:
            yield b"".join(held)


# --- this process's state -----------------------------------------------------------

_registry = masters.Registry()
_launcher = _Launcher()


def close_all() -> None:
    _registry.close_all()


def _reset_after_fork() -> None:
    """A forked child starts with none: the masters are its parent's children."""
    global _registry, _launcher
    _registry, _launcher = masters.Registry(), _Launcher()


os.register_at_fork(after_in_child=_reset_after_fork)
atexit.register(lambda: _registry.close_all())
