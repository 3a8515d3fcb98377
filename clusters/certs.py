"""The portal as an SSH certificate authority for clusters in certificate mode.

For each connection the portal makes an Ed25519 key pair in memory and signs a short-lived
OpenSSH user certificate for it: the cluster user as the only principal, valid for
``PORTAL_SSH_CERT_MINUTES``, a key id naming the portal user, the cluster user and what
the portal is doing (sshd logs it with every login), and ``source-address`` when
``PORTAL_SSH_CERT_SOURCE_ADDRESSES`` is set. Neither the key nor the certificate is
written anywhere, but for the moment an upload's OpenSSH master logs in with them
(clusters/bulk.py: a private directory in memory, the files removed once it is in):
the CA's private key (``PORTAL_SSH_CA_KEY_FILES``) is the one secret.

Several CA files may be listed (rotation): the first signs, every one listed is "ours".
The certificate format is cryptography's (``SSHCertificateBuilder``); paramiko presents it.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import os
import re
import secrets
import threading
from pathlib import Path

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import (
    SSHCertificate,
    SSHCertificateBuilder,
    SSHCertificateType,
)
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from common import context, crypto

# sshd logs the key id; keep it to characters that read unambiguously in a log line.
_UNSAFE = re.compile(r"[^A-Za-z0-9._@:+=-]+")
KEY_ID_MAX = 200
# The certificate is valid from a little before now: the cluster's clock may run behind.
CLOCK_SKEW = dt.timedelta(seconds=30)

CAKey = ed25519.Ed25519PrivateKey  # (any key cryptography can sign certificates with)


class CAMissing(ImproperlyConfigured):
    """No usable CA key: certificate-mode clusters cannot be reached."""


_cache_lock = threading.Lock()
_cache: dict[str, tuple[tuple[int, int], object]] = {}


def check_ca_file(path: str) -> os.stat_result:
    """The CA key file's stat, or CAMissing: absent, readable by group or others, or owned
    by another user than the process that signs (whoever can read it can be anyone on
    every cluster that trusts it)."""
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise CAMissing(
            f"The SSH certificate authority's key {path} cannot be read ({exc.strerror}); "
            "create it with `manage.py ssh_ca` or set PORTAL_SSH_CA_KEY_FILES."
        ) from None
    if stat.st_mode & 0o077:
        raise CAMissing(
            f"The SSH CA key {path} is open to group or others (mode "
            f"{stat.st_mode & 0o777:04o}): refused. Make it readable by its owner only "
            f"(chmod 600 {path})."
        )
    if stat.st_uid != os.geteuid():
        raise CAMissing(
            f"The SSH CA key {path} belongs to uid {stat.st_uid}, not to uid {os.geteuid()} "
            "that signs with it: refused. Give it to the signing service's user."
        )
    return stat


def check_ca_files() -> None:
    """Every configured CA key file that exists passes ``check_ca_file``: a process that
    signs checks them as it starts (portal/celery.py, the signer) and stops on a key
    others could read. (A missing one is said when a certificate is wanted.)"""
    for path in settings.PORTAL_SSH_CA_KEY_FILES:
        if os.path.lexists(path):
            check_ca_file(path)


def load_ca(path: str):
    """The CA private key in ``path`` (cached while the file is unchanged)."""
    stat = check_ca_file(path)
    stamp = (stat.st_mtime_ns, stat.st_size)
    with _cache_lock:
        hit = _cache.get(path)
        if hit and hit[0] == stamp:
            return hit[1]
    try:
        key = serialization.load_ssh_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError) as exc:
        raise CAMissing(f"The SSH CA key {path} is not an OpenSSH private key: {exc}") from None
    with _cache_lock:
        _cache[path] = (stamp, key)
    return key


def ca_files() -> list[str]:
    files = list(settings.PORTAL_SSH_CA_KEY_FILES)
    if not files:
        raise CAMissing(
            "A cluster uses SSH certificates but PORTAL_SSH_CA_KEY_FILES is not set: name the "
            "CA's private key file(s) (the first signs), made with `manage.py ssh_ca`."
        )
    return files


def signing_key():
    """The CA key that signs: the first of PORTAL_SSH_CA_KEY_FILES."""
    return load_ca(ca_files()[0])


def public_line(key, comment: str = "") -> str:
    """A CA key's OpenSSH public key line, for TrustedUserCAKeys."""
    line = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    return f"{line} {comment}".strip()


def fingerprint(key) -> str:
    blob = base64.b64decode(public_line(key).split()[1])
    return crypto.ssh_fingerprint(blob)


def ca_fingerprint() -> str:
    """SHA256 fingerprint of the signing CA: a rotation changes it (the pool reconnects)."""
    return fingerprint(signing_key())


def is_ours(ca_public_key) -> bool:
    """Whether a CA public key is one of PORTAL_SSH_CA_KEY_FILES'."""
    wanted = ca_public_key.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return any(
        load_ca(path)
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        == wanted
        for path in ca_files()
    )


def make_key_id(
    portal_user: str,
    cluster_user: str,
    cluster: str,
    purpose: str,
    serial: int,
    request_id: str = "",
) -> str:
    """``portal:<who>:<cluster user>@<cluster>:<purpose>[:req=<request id>]:<serial>``,
    bounded; the request id (common/context.py, checked well formed) and the serial are never
    cut."""
    raw = f"portal:{portal_user}:{cluster_user}@{cluster}:{purpose or 'sync'}"
    safe = _UNSAFE.sub("_", raw).strip("_")
    request = context.well_formed(request_id)
    suffix = (f":req={request}" if request else "") + f":{serial:016x}"
    return safe[: KEY_ID_MAX - len(suffix)] + suffix


def issue(
    cluster_user: str,
    portal_user: str,
    purpose: str = "",
    *,
    cluster: str = "",
    request_id: str = "",
) -> paramiko.PKey:
    """A fresh in-memory Ed25519 key with a certificate for ``cluster_user`` loaded, signed
    here with the CA key (a process that asks the signer uses clusters/signer.py).

    ``portal_user`` ("" for the portal's own work), ``purpose`` and the ``request_id`` it
    is issued for go into the key id.
    """
    key = ed25519.Ed25519PrivateKey.generate()
    certificate = sign(
        key.public_key(),
        cluster_user,
        portal_user,
        purpose,
        cluster=cluster,
        request_id=request_id,
    )
    return with_certificate(key, certificate)


def sign(
    public_key: ed25519.Ed25519PublicKey,
    cluster_user: str,
    portal_user: str,
    purpose: str = "",
    *,
    cluster: str = "",
    request_id: str = "",
) -> SSHCertificate:
    """A user certificate for ``public_key``, signed by the first CA (see ``issue``): no
    extensions (no terminal, no forwarding), PORTAL_SSH_CERT_MINUTES."""
    return _certificate(
        public_key,
        cluster_user,
        lambda serial: make_key_id(
            portal_user or "-", cluster_user, cluster, purpose, serial, request_id
        ),
        minutes=settings.PORTAL_SSH_CERT_MINUTES,
        extensions=(),
        addresses=settings.PORTAL_SSH_CERT_SOURCE_ADDRESSES,
    )


# What a person's own certificate permits (jobs/node_access.py): a terminal, and
# the port forwarding an editor's remote server needs; never agent or X11 forwarding or
# ~/.ssh/rc.
PERSONAL_EXTENSIONS = (b"permit-pty", b"permit-port-forwarding")


def personal_principal(cluster_user: str, cluster: str) -> str:
    """The principal of a person's own certificate: their cluster user *on that cluster*
    (``ada@hpc1``), so the certificate is refused by every other cluster trusting the same
    CA, where ``ada`` may be somebody else (the principals file lists it:
    docs/run/certificates.md)."""
    return f"{cluster_user}@{cluster}"


def sign_personal(
    public_key,
    cluster_user: str,
    portal_user: str,
    purpose: str,
    *,
    cluster: str,
    force_command: str,
    valid_before: dt.datetime | None = None,
    request_id: str = "",
    now: dt.datetime | None = None,
) -> SSHCertificate:
    """A certificate for a person's own key (clusters.models.PersonalKey) into one job:
    ``personal_principal`` the only principal, ``force-command`` the job's way in (whatever
    the client asks runs inside the job: jobs/node_access.py), valid for
    PORTAL_SSH_USER_CERT_MINUTES from ``now`` and never past ``valid_before`` (the job's
    end), a terminal and port forwarding, ``source-address`` from
    PORTAL_SSH_USER_CERT_SOURCE_ADDRESSES."""
    return _certificate(
        public_key,
        personal_principal(cluster_user, cluster),
        lambda serial: make_key_id(portal_user, cluster_user, cluster, purpose, serial, request_id),
        minutes=settings.PORTAL_SSH_USER_CERT_MINUTES,
        extensions=PERSONAL_EXTENSIONS,
        addresses=settings.PORTAL_SSH_USER_CERT_SOURCE_ADDRESSES,
        now=now,
        until=valid_before,
        force_command=force_command,
    )


def _certificate(
    public_key,
    principal: str,
    key_id,
    *,
    minutes: int,
    extensions: tuple[bytes, ...],
    addresses: list[str],
    now: dt.datetime | None = None,
    until: dt.datetime | None = None,
    force_command: str = "",
) -> SSHCertificate:
    ca = signing_key()
    serial = secrets.randbits(64)
    now = now or dt.datetime.now(dt.UTC)
    before = now + dt.timedelta(minutes=minutes)
    if until is not None:
        before = min(before, until)
    builder = (
        SSHCertificateBuilder()
        .public_key(public_key)
        .serial(serial)
        .type(SSHCertificateType.USER)
        .key_id(key_id(serial).encode())
        .valid_principals([principal.encode()])
        .valid_after(int((now - CLOCK_SKEW).timestamp()))
        .valid_before(int(before.timestamp()))
    )
    if force_command:
        builder = builder.add_critical_option(b"force-command", force_command.encode())
    if addresses:
        builder = builder.add_critical_option(b"source-address", ",".join(addresses).encode())
    for name in extensions:
        builder = builder.add_extension(name, b"")
    return builder.sign(ca)


def with_certificate(key: ed25519.Ed25519PrivateKey, certificate: SSHCertificate) -> paramiko.PKey:
    """A paramiko key for ``key`` that offers ``certificate`` (both stay in memory)."""
    text = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    pkey = paramiko.Ed25519Key.from_private_key(io.StringIO(text))
    blob = base64.b64decode(certificate.public_bytes().split()[1])
    pkey.load_certificate(paramiko.Message(blob))
    return pkey


def certificate_of(pkey: paramiko.PKey) -> SSHCertificate | None:
    """The certificate a paramiko key offers, or None for a plain key."""
    blob = pkey.public_blob
    if blob is None or not blob.key_type.endswith("-cert-v01@openssh.com"):
        return None
    line = f"{blob.key_type} {base64.b64encode(blob.key_blob).decode()}".encode()
    identity = serialization.load_ssh_public_identity(line)
    return identity if isinstance(identity, SSHCertificate) else None


def new_ca_file(path: Path) -> bool:
    """Create an Ed25519 CA key at ``path`` (0600, its .pub beside it) unless one is there.
    Returns whether it made one."""
    if path.exists():
        return False
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = ed25519.Ed25519PrivateKey.generate()
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    try:
        os.link(tmp, path)  # never replaces a CA another process made meanwhile
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    Path(f"{path}.pub").write_text(public_line(key, f"hpc-portal-user-ca:{path.name}") + "\n")
    return True
