"""The one place that runs commands on a cluster: paramiko over SSH.

Every command is given as an argument list and each argument is shell-quoted
here, so nothing a user or an admin typed is ever interpreted by the remote
shell. The server's host key must match the key pinned on the Cluster.
"""

from __future__ import annotations

import io
import logging
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import paramiko
from django.conf import settings

from clusters import acting, certs, deadline, signer
from common import context, crypto
from common import prometheus as metrics

log = logging.getLogger(__name__)

MAX_OUTPUT_BYTES = 32 * 1024 * 1024

# What this process did over SSH; tests and bench/ read it to count round trips.
counters = {"connections": 0, "commands": 0}


class ClusterError(Exception):
    """A cluster operation failed. ``transient`` says whether trying again may help."""

    transient = False

    def __init__(
        self, message: str, *, command: str = "", stderr: str = "", exit_status: int | None = None
    ):
        super().__init__(message)
        self.command = command
        self.stderr = stderr
        self.exit_status = exit_status


class ClusterUnreachable(ClusterError):
    """Network trouble, a dropped connection or a timeout: try again later."""

    transient = True


class CommandTimedOut(ClusterUnreachable):
    """A command (or SFTP call) did not finish within its timeout, or the task's deadline
    (clusters.deadline) left it no time: ``seconds`` is the bound it had."""

    def __init__(self, message: str, *, seconds: float, command: str = ""):
        super().__init__(message, command=command)
        self.seconds = seconds


class HostKeyMismatch(ClusterError):
    """The server presented a key other than the pinned one: never connect."""


class AuthenticationFailed(ClusterError):
    """The cluster refused the account's key."""


class CommandFailed(ClusterError):
    """The remote command ran and exited non-zero; ``stderr`` holds its message."""


class SchedulerUnavailable(ClusterError):
    """The scheduler answered with an error that means 'busy or down, try again'."""

    transient = True


def run_scheduler_command(
    conn: Connection,
    argv: list[str],
    is_transient: Callable[[str], bool],
    *,
    stdin: str | None = None,
    check: bool = True,
    max_bytes: int | None = None,
    clean: bool = True,
) -> Result:
    """Run a scheduler's command; an error its adapter's ``is_transient`` recognises as
    'busy or down' becomes SchedulerUnavailable (retried), any other stays CommandFailed.

    ``clean`` (reads): in a clean environment, ``env -i`` with the cluster's PATH
    (Cluster.command_path), so no function, alias or variable of the login environment
    reaches the command. Submissions pass False: the job takes the submitter's environment."""
    path = getattr(conn, "command_path", "") if clean else ""
    if path:
        argv = ["/usr/bin/env", "-i", f"PATH={path}", "LANG=C", *argv]
    try:
        return conn.run(argv, stdin=stdin, check=check, max_bytes=max_bytes)
    except CommandFailed as exc:
        if is_transient(exc.stderr or str(exc)):
            raise SchedulerUnavailable(
                str(exc), command=exc.command, stderr=exc.stderr, exit_status=exc.exit_status
            ) from None
        raise


@dataclass(frozen=True)
class Result:
    stdout: str
    stderr: str
    exit_status: int


def quote_command(argv: Sequence[str]) -> str:
    """Join an argument list into one shell command line, every argument quoted."""
    if isinstance(argv, str):
        raise TypeError("pass the command as a list of arguments, not a string")
    return " ".join(shlex.quote(str(arg)) for arg in argv)


def load_private_key(text: str) -> paramiko.PKey:
    """Parse an OpenSSH or PEM private key (Ed25519, ECDSA or RSA)."""
    errors = []
    for cls in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return cls.from_private_key(io.StringIO(text))
        except (paramiko.SSHException, ValueError) as exc:
            errors.append(f"{cls.__name__}: {exc}")
    raise AuthenticationFailed("The account's private key cannot be read: " + "; ".join(errors))


def key_fingerprint(key: paramiko.PKey) -> str:
    return crypto.ssh_fingerprint(key.asbytes())


def host_key_matches(pinned: str, presented: paramiko.PKey) -> bool:
    pinned = pinned.strip()
    if pinned.startswith("SHA256:"):
        return pinned == key_fingerprint(presented)
    parts = pinned.split()
    return len(parts) >= 2 and parts[1] == presented.get_base64()


def _preferred_key_types(pinned: str) -> tuple[str, ...] | None:
    """Ask the server for the pinned key's type (it may hold several host keys)."""
    parts = pinned.strip().split()
    if len(parts) < 2:
        return None
    if parts[0] == "ssh-rsa":
        return ("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")
    return (parts[0],)


class Connection:
    """One authenticated SSH transport; commands open channels on it."""

    def __init__(
        self,
        host: str,
        port: int,
        username: str,
        pkey: paramiko.PKey,
        pinned_host_key: str,
        *,
        connect_timeout: float = 10.0,
        command_timeout: float = 60.0,
        keepalive: int = 30,
        cluster: str = "",
        command_path: str = "",
    ):
        self.host, self.port, self.username = host, port, username
        # The PATH scheduler reads run with, in a clean environment ("": none, as is).
        self.command_path = command_path
        self.cluster = metrics.cluster_label(cluster)  # (the metrics' label only)
        self.pinned_host_key = pinned_host_key
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self._pkey = pkey
        cert = certs.certificate_of(pkey)
        # The certificate's key id ("" for a stored key) and when it stops being accepted.
        self.key_id = cert.key_id.decode(errors="replace") if cert else ""
        self.expires_at: float | None = float(cert.valid_before) if cert else None
        self._transport: paramiko.Transport | None = None
        self._sftp: paramiko.SFTPClient | None = None
        # paramiko's SFTPClient is not safe across threads: its packets are sent outside
        # its lock, so two threads' requests interleave on the channel (sftp-server then
        # takes the second request's bytes as the first one's data: a file corrupted).
        # One thread at a time on the shared session (a web process serves each request
        # in a thread of its own; a cancelled request's thread runs on to its end).
        self._sftp_lock = threading.RLock()
        self._keepalive = keepalive
        self.commands_run = 0

    def __repr__(self) -> str:
        return f"<Connection {self.username}@{self.host}:{self.port}>"

    # -- life cycle ---------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._transport is not None and self._transport.is_active()

    @property
    def expired(self) -> bool:
        """Its certificate has expired (or is about to): the pool replaces the connection."""
        return self.expires_at is not None and time.time() >= self.expires_at - 10

    def open(self) -> Connection:
        """Connected and logged in; counted by the metrics, failures by their kind."""
        try:
            self._open()
        except HostKeyMismatch:
            metrics.SSH_CONNECT_FAILURES.labels(self.cluster, "host_key").inc()
            raise
        except AuthenticationFailed:
            metrics.SSH_CONNECT_FAILURES.labels(self.cluster, "authentication").inc()
            raise
        except ClusterError:
            metrics.SSH_CONNECT_FAILURES.labels(self.cluster, "unreachable").inc()
            raise
        metrics.SSH_CONNECTS.labels(self.cluster).inc()
        return self

    def _open(self) -> None:
        where = f"{self.username}@{self.host}:{self.port}"
        if self.expired:  # a fresh connection gets a fresh certificate (pool.with_connection)
            raise ClusterUnreachable(f"The certificate for {where} has expired; reconnect.")
        # Within the task's deadline too (clusters.deadline).
        limit = deadline.cap(self.connect_timeout)
        if limit <= 0:
            raise CommandTimedOut(f"No time left to connect to {where}.", seconds=0)
        try:
            sock = socket.create_connection((self.host, self.port), timeout=limit)
        except OSError as exc:
            raise ClusterUnreachable(f"Cannot reach {self.host}:{self.port}: {exc}") from None
        # SFTP and commands are request and answer: with Nagle's algorithm a small request
        # waits for the ACK of the last one, which the server delays (40 ms on Linux).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport = paramiko.Transport(sock)
        # AES-GCM first, as OpenSSH orders them (after chacha20, which paramiko lacks): one
        # AEAD pass per packet instead of AES-CTR then an HMAC, about 1.3x the SFTP
        # throughput here. A server without it still gets paramiko's others.
        options = transport.get_security_options()
        options.ciphers = tuple(sorted(options.ciphers, key=lambda name: "-gcm@" not in name))
        transport.banner_timeout = limit
        transport.handshake_timeout = limit
        # (paramiko's own 30 s for authentication, or less within a deadline)
        transport.auth_timeout = max(0.1, deadline.cap(transport.auth_timeout or 30))
        types = _preferred_key_types(self.pinned_host_key)
        if types:
            transport.get_security_options().key_types = types
        try:
            transport.start_client(timeout=limit)
            presented = transport.get_remote_server_key()
            if not host_key_matches(self.pinned_host_key, presented):
                raise HostKeyMismatch(
                    f"Host key mismatch for {self.host}:{self.port}: the server presented "
                    f"{presented.get_name()} {key_fingerprint(presented)}, which is not the key "
                    "pinned for this cluster. Refusing to connect. If the cluster's key really "
                    "changed, an administrator must pin the new key."
                )
            try:
                transport.auth_publickey(self.username, self._pkey)
            except paramiko.AuthenticationException as exc:
                hint = (
                    f"Does its sshd trust the portal's CA (TrustedUserCAKeys) and list "
                    f"{self.username} in the AuthorizedPrincipalsFile for {self.username}?"
                    if self.key_id
                    else f"Is the public key in ~{self.username}/.ssh/authorized_keys on "
                    "the cluster?"
                )
                raise AuthenticationFailed(
                    f"{where} refused the account's {'certificate' if self.key_id else 'key'} "
                    f"({exc}). {hint}"
                ) from None
        except ClusterError:
            transport.close()
            raise
        except (paramiko.SSHException, OSError, EOFError) as exc:
            transport.close()
            raise ClusterUnreachable(f"SSH to {where} failed: {exc}") from None
        if self._keepalive:
            transport.set_keepalive(self._keepalive)
        self._transport = transport
        counters["connections"] += 1
        log.debug("connected %s", where)

    def _live_transport(self) -> paramiko.Transport:
        """The open transport, connecting first if there is none (or it died)."""
        if not self.is_open:
            self.open()
        if self._transport is None:  # open() sets it or raises
            raise ClusterUnreachable(f"no SSH connection to {self.host}")
        return self._transport

    def close(self) -> None:
        self._sftp = None
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def __enter__(self) -> Connection:
        if not self.is_open:
            self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- commands -------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        check: bool = True,
        max_bytes: int | None = None,
    ) -> Result:
        """Run ``argv`` (each argument quoted) and return its output (at most ``max_bytes``).

        Raises CommandFailed on a non-zero exit when ``check`` is true, and
        ClusterUnreachable when the connection drops or the command times out.
        """
        command = quote_command(argv)
        return self.run_script(
            command, stdin=stdin, timeout=timeout, check=check, max_bytes=max_bytes
        )

    def run_script(
        self,
        command: str,
        *,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        check: bool = True,
        max_bytes: int | None = None,
    ) -> Result:
        """Run a command line built by this package from quoted parts.

        Only the cluster layer and the scheduler adapters use this, with fixed text and values
        passed through :func:`quote_command` or ``shlex.quote``. Timed and counted by the
        metrics under the command's name (common.prometheus.command_name).
        """
        name = metrics.command_name(command)
        started = time.monotonic()
        try:
            return self._run_script(command, stdin, timeout, check, max_bytes)
        except CommandTimedOut:
            metrics.SCHEDULER_COMMAND_FAILURES.labels(self.cluster, name, "timeout").inc()
            raise
        except CommandFailed:
            metrics.SCHEDULER_COMMAND_FAILURES.labels(self.cluster, name, "failed").inc()
            raise
        except ClusterError:
            metrics.SCHEDULER_COMMAND_FAILURES.labels(self.cluster, name, "unreachable").inc()
            raise
        finally:
            metrics.SCHEDULER_COMMAND_SECONDS.labels(self.cluster, name).observe(
                time.monotonic() - started
            )

    def _run_script(
        self,
        command: str,
        stdin: str | bytes | None,
        timeout: float | None,
        check: bool,
        max_bytes: int | None,
    ) -> Result:
        transport = self._live_transport()
        # The command's own timeout, or less: what is left of the task's deadline.
        timeout = deadline.cap(self.command_timeout if timeout is None else timeout)
        if timeout <= 0:
            raise CommandTimedOut(
                f"No time left to run a command on {self.host}.", seconds=0, command=command
            )
        try:
            channel = transport.open_session(timeout=min(self.connect_timeout, timeout))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self.close()
            raise ClusterUnreachable(
                f"SSH channel to {self.host} failed: {exc}", command=command
            ) from None
        self.commands_run += 1
        counters["commands"] += 1
        try:
            channel.exec_command(command)
            if stdin is not None:
                channel.sendall(stdin.encode() if isinstance(stdin, str) else stdin)
            channel.shutdown_write()
            out, err = self._collect(channel, command, timeout, max_bytes or MAX_OUTPUT_BYTES)
            status = channel.recv_exit_status()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self.close()
            raise ClusterUnreachable(
                f"SSH command on {self.host} failed: {exc}", command=command
            ) from None
        finally:
            channel.close()
        result = Result(out.decode(errors="replace"), err.decode(errors="replace"), status)
        if check and status != 0:
            message = result.stderr.strip() or result.stdout.strip() or f"exit status {status}"
            raise CommandFailed(message, command=command, stderr=result.stderr, exit_status=status)
        return result

    def _collect(
        self, channel: paramiko.Channel, command: str, timeout: float, max_bytes: int
    ) -> tuple[bytes, bytes]:
        until = time.monotonic() + timeout
        out, err = bytearray(), bytearray()
        while True:
            if channel.recv_ready():
                out += channel.recv(65536)
            if channel.recv_stderr_ready():
                err += channel.recv_stderr(65536)
            if len(out) + len(err) > max_bytes:
                raise CommandFailed(
                    f"Output of {command!r} exceeds {max_bytes} bytes", command=command
                )
            # The end of the output is the channel's EOF, not the exit status:
            # sshd may report the exit status before the last output arrives.
            if (
                channel.eof_received
                and not channel.recv_ready()
                and not channel.recv_stderr_ready()
            ):
                return bytes(out), bytes(err)
            remaining = until - time.monotonic()
            if remaining <= 0:
                raise CommandTimedOut(
                    f"{command[:200]!r} on {self.host} timed out after {timeout:.0f} s",
                    seconds=timeout,
                    command=command,
                )
            select.select([channel], [], [], min(remaining, 0.5))

    @contextmanager
    def sftp_session(self, *, own: bool = False) -> Iterator[paramiko.SFTPClient]:
        """The SFTP session for a few calls. Every call has the command timeout (a FIFO
        in a job's directory would otherwise block a read for ever); a timeout or a
        broken session closes the connection and raises ClusterUnreachable. Each call's
        timeout is also capped by what is left of the task's deadline at the start.

        The connection's shared session is used by one thread at a time: another
        thread's block is waited for (as long as a call may take; then CommandTimedOut,
        never a reconnect that would cut the other thread's work). ``own``: a session of
        its own, closed after the block, for a transfer that lasts (a download streamed at
        its client's pace) and must not hold the shared one meanwhile (paramiko's
        SFTPClient is not thread-safe; its transport is)."""
        limit = deadline.cap(self.command_timeout)
        if limit <= 0:
            raise CommandTimedOut(f"No time left to read files on {self.host}.", seconds=0)
        if not own and not self._sftp_lock.acquire(timeout=limit):
            raise CommandTimedOut(
                f"SFTP on {self.host} stayed busy with another request of the same account "
                f"for {limit:.0f} s.",
                seconds=limit,
            )
        try:
            sftp = self._open_sftp() if own else self.sftp()
            channel = sftp.get_channel()
            if channel is not None:
                channel.settimeout(limit)
            try:
                yield sftp
            except (TimeoutError, paramiko.SSHException, EOFError) as exc:
                self.close()  # the server side may be stuck in an open(): start afresh
                raise ClusterUnreachable(
                    f"SFTP on {self.host} failed or timed out: {exc or type(exc).__name__}"
                ) from None
            finally:
                if own:
                    sftp.close()
        finally:
            if not own:
                self._sftp_lock.release()

    @property
    def in_use(self) -> bool:
        """Another thread is inside the shared ``sftp_session`` on this connection now."""
        if not self._sftp_lock.acquire(blocking=False):
            return True
        self._sftp_lock.release()
        return False

    def sftp(self) -> paramiko.SFTPClient:
        """The connection's SFTP session, opened once and reused."""
        if self._sftp is not None and self.is_open:
            channel = self._sftp.get_channel()
            if channel is not None and not channel.closed:
                return self._sftp
        self._sftp = self._open_sftp()
        return self._sftp

    def _open_sftp(self) -> paramiko.SFTPClient:
        transport = self._live_transport()
        # The channel, the subsystem's start and the version exchange within the command
        # timeout and the deadline: sshd may start an external sftp-server through the
        # person's login shell, whose ~/.bashrc can hang it before it answers.
        limit = deadline.cap(self.command_timeout)
        if limit <= 0:
            raise CommandTimedOut(f"No time left to open SFTP on {self.host}.", seconds=0)
        try:
            channel = transport.open_session(timeout=limit)
            channel.settimeout(limit)
            channel.invoke_subsystem("sftp")
            sftp = paramiko.SFTPClient(channel)
            channel.settimeout(self.command_timeout)
        except TimeoutError:
            self.close()
            raise CommandTimedOut(
                f"SFTP on {self.host} did not start within {limit:.0f} s (a login environment "
                "that hangs, such as ~/.bashrc?).",
                seconds=limit,
            ) from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self.close()
            raise ClusterUnreachable(f"SFTP to {self.host} failed: {exc}") from None
        counters["commands"] += 1
        return sftp


def account_key(account) -> paramiko.PKey:
    """What a ClusterAccount logs in with: in certificate mode a fresh key and certificate
    (key id naming who asked and what for: ``acting.requester`` and ``acting.purpose``,
    "-" and "sync" for the portal's own bookkeeping), else its stored key. A person's own
    action needs their word from the identity provider to be current
    (``signer.stale_refusal``; for certificates part of ``signer.signing_refusal``, which
    a signer process asks too)."""
    cluster = account.cluster
    requester, purpose = acting.requester.get(), acting.purpose.get()
    if not cluster.uses_certificates:
        if stale := signer.stale_refusal(account, requester):
            raise AuthenticationFailed(stale)  # the provider's word is too old
        if not account.private_key_encrypted:  # made, but no key generated or installed yet
            raise AuthenticationFailed(f"cluster account {account.username} has no key yet")
        return load_private_key(account.private_key())
    # The signer's own check, whatever page or task asked: a certificate only for a
    # cluster user the cluster's user map or an administrator vouched for (a signer
    # process asks it again on its side).
    refusal = signer.signing_refusal(account, requester)
    if refusal:
        raise AuthenticationFailed(refusal)
    try:
        if settings.PORTAL_SSH_SIGNER_SOCKET:  # this process never reads the CA key
            return signer.issue(account, requester, purpose)
        return certs.issue(
            account.username,
            requester,
            purpose,
            cluster=cluster.name,
            request_id=context.current(),
        )
    except (certs.CAMissing, signer.Refused) as exc:
        raise AuthenticationFailed(str(exc)) from None
    except signer.Unreachable as exc:
        raise ClusterUnreachable(str(exc)) from None


def connect_account(account) -> Connection:
    """An opened Connection for a ClusterAccount, with timeouts from settings."""
    cluster = account.cluster
    return Connection(
        cluster.ssh_host,
        cluster.ssh_port,
        account.username,
        account_key(account),
        cluster.host_key,
        connect_timeout=settings.SSH_CONNECT_TIMEOUT,
        command_timeout=settings.SSH_COMMAND_TIMEOUT,
        keepalive=settings.SSH_KEEPALIVE_INTERVAL,
        cluster=cluster.name,
        command_path=cluster.command_path,
    ).open()


def fetch_host_key(host: str, port: int, timeout: float = 10.0) -> str:
    """The host key a server presents now, as an OpenSSH public key line.

    Trust on first use: only for an administrator's explicit "trust this key"
    step, never on the way to running a command.
    """
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise ClusterUnreachable(f"Cannot reach {host}:{port}: {exc}") from None
    transport = paramiko.Transport(sock)
    try:
        transport.start_client(timeout=timeout)
        key = transport.get_remote_server_key()
        return f"{key.get_name()} {key.get_base64()}"
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise ClusterUnreachable(f"SSH handshake with {host}:{port} failed: {exc}") from None
    finally:
        transport.close()
