"""What the portal gives OpenSSH's client (clusters/bulk.py), built here as pure
functions of their inputs: the argument lists of a master, of a client multiplexed over
it and of its check, the one known_hosts line (the cluster's pinned key), the remote
command that writes an upload's bytes, and the key and certificate as OpenSSH reads them.

Every ssh started here reads no ssh_config (``-F /dev/null``) and no agent, knows only
the pinned host key and asks nothing; the host comes after ``--`` and the remote command
is one argument whose every word is shell-quoted (``ssh.quote_command``), so nothing a
person typed (a file name) reaches a shell unquoted.
"""

from __future__ import annotations

import base64
import io
import re

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from clusters import ssh

_KEY_TYPE = re.compile(r"[a-z0-9][a-z0-9@.-]*")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_HOST = re.compile(r"[A-Za-z0-9_.:-]+")


class Unusable(ValueError):
    """OpenSSH cannot be given this cluster's settings (see ``known_hosts_line``)."""


def known_hosts_line(host: str, port: int, pinned: str) -> str:
    """The one known_hosts line for the cluster: its pinned key. A pin by fingerprint
    (SHA256:...) gives OpenSSH nothing to compare with: Unusable."""
    parts = pinned.strip().split()
    if len(parts) < 2 or not _KEY_TYPE.fullmatch(parts[0]) or not _BASE64.fullmatch(parts[1]):
        raise Unusable("the cluster's host key is not pinned as a key line (a fingerprint?)")
    if not _HOST.fullmatch(host):
        raise Unusable(f"the cluster's address {host!r} is no plain host name or address")
    name = host if port == 22 else f"[{host}]:{port}"
    return f"{name} {parts[0]} {parts[1]}\n"


def common(known_hosts: str) -> list[str]:
    """Options of every ssh started here: nothing from any ssh_config or agent, the
    pinned key the only one known, never a question, never a forwarding."""
    options = {
        "BatchMode": "yes",
        "IdentitiesOnly": "yes",
        "IdentityAgent": "none",
        "UserKnownHostsFile": known_hosts,
        "GlobalKnownHostsFile": "/dev/null",
        "StrictHostKeyChecking": "yes",
        "UpdateHostKeys": "no",
        "CheckHostIP": "no",
        "ForwardAgent": "no",
        "ForwardX11": "no",
        "ClearAllForwardings": "yes",
        "PermitLocalCommand": "no",
        "LogLevel": "ERROR",
    }
    argv = ["-F", "/dev/null"]
    for name, value in options.items():
        argv += ["-o", f"{name}={value}"]
    return argv


def master_argv(
    ssh_path: str,
    control: str,
    key: str,
    certificate: str | None,
    known_hosts: str,
    host: str,
    port: int,
    user: str,
    *,
    connect_timeout: float,
    keepalive: int,
    ciphers: str = "",
) -> list[str]:
    """The master: logs in, runs nothing, stays in the foreground (a child of ours).
    ``ciphers``: OpenSSH's Ciphers list in order of preference ("": its own)."""
    argv = [ssh_path, "-M", "-N", "-T", "-S", control, *common(known_hosts)]
    argv += ["-o", "ControlPersist=no", "-o", "PreferredAuthentications=publickey"]
    if ciphers:
        argv += ["-o", f"Ciphers={ciphers}"]
    argv += ["-o", f"ConnectTimeout={max(1, round(connect_timeout))}", "-i", key]
    if certificate:
        argv += ["-o", f"CertificateFile={certificate}"]
    if keepalive:
        argv += ["-o", f"ServerAliveInterval={keepalive}", "-o", "ServerAliveCountMax=3"]
    return [*argv, *_destination(host, port, user)]


# OpenSSH's own list (9.x), AES-GCM first: with the CPU's AES instructions it costs about
# two thirds of ChaCha20-Poly1305's time per byte on each side (bench/files_transfer.py),
# and a server without it still agrees on one of the rest.
AES_FIRST = (
    "aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,"
    "aes128-ctr,aes192-ctr,aes256-ctr"
)


def ciphers(setting: str, cpuinfo: str) -> str:
    """The Ciphers list a master is given: ``setting`` where one is set ("openssh":
    OpenSSH's own order), else AES-GCM first when ``cpuinfo`` (the text of
    /proc/cpuinfo) shows AES instructions (x86's ``aes`` flag, Arm's ``aes`` feature),
    else OpenSSH's own order ("")."""
    if setting == "openssh":
        return ""
    if setting:
        return setting  # (its form checked with the settings)
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features") and "aes" in value.split():
            return AES_FIRST
    return ""


def _destination(host: str, port: int, user: str) -> list[str]:
    """Where every ssh of these connects (the host last: nothing after ``--`` is an option)."""
    return ["-p", str(port), "-l", user, "--", host]


def client_argv(
    ssh_path: str, control: str, known_hosts: str, host: str, port: int, user: str, command: str
) -> list[str]:
    """A client multiplexed over the master. Should its socket be gone, ssh would connect
    on its own: ProxyCommand=false makes that fail at once instead of trying other keys.
    No escape character: the bytes are binary."""
    return [
        ssh_path,
        "-T",
        "-e",
        "none",
        "-S",
        control,
        *common(known_hosts),
        "-o",
        "ControlMaster=no",
        "-o",
        "ProxyCommand=false",
        *_destination(host, port, user),
        command,
    ]


def check_argv(ssh_path: str, control: str, host: str, port: int, user: str) -> list[str]:
    """Asks the master whether it is up (logged in: the socket listens from then on)."""
    return [
        ssh_path,
        "-F",
        "/dev/null",
        "-S",
        control,
        "-O",
        "check",
        *_destination(host, port, user),
    ]


def writer_command(path: str, offset: int) -> str:
    """GNU dd writing stdin into ``path`` from byte ``offset``: never truncating
    (notrunc), never creating (nocreat: the partial file is made by the upload's start),
    never through a link in its last name (nofollow); messages in English (LC_ALL=C),
    every word quoted."""
    if not path.startswith("/") or "\0" in path:
        raise ValueError("the path to write must be absolute")
    if offset < 0:
        raise ValueError("the offset must not be negative")
    return ssh.quote_command(
        [
            "env",
            "LC_ALL=C",
            "dd",
            f"of={path}",
            "bs=1M",
            f"seek={offset}",
            "oflag=seek_bytes,nofollow",
            "conv=notrunc,nocreat",
            "status=none",
        ]
    )


def reader_command(path: str, first: int, count: int) -> str:
    """GNU dd writing ``count`` bytes of ``path`` from byte ``first`` to stdout (fewer
    where the file is shorter now), never through a link in its last name (nofollow),
    never waiting on a FIFO swapped in (nonblock: it fails at once); messages in English,
    every word quoted."""
    if not path.startswith("/") or "\0" in path:
        raise ValueError("the path to read must be absolute")
    if first < 0 or count < 0:
        raise ValueError("the range must not be negative")
    return ssh.quote_command(
        [
            "env",
            "LC_ALL=C",
            "dd",
            f"if={path}",
            "bs=1M",
            f"skip={first}",
            f"count={count}",
            "iflag=skip_bytes,count_bytes,nofollow,nonblock",
            "status=none",
        ]
    )


def private_key_text(pkey: paramiko.PKey) -> str:
    """The key in a format OpenSSH reads (paramiko writes RSA and ECDSA keys as PEM, but
    no Ed25519 key: that one from its 32-byte seed)."""
    if isinstance(pkey, paramiko.Ed25519Key):
        # (paramiko keeps the PyNaCl signing key there, and writes no Ed25519 key out)
        seed = bytes(pkey._signing_key)  # type: ignore[attr-defined]
        key = ed25519.Ed25519PrivateKey.from_private_bytes(seed[:32])
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        ).decode()
    out = io.StringIO()
    pkey.write_private_key(out)
    return out.getvalue()


def certificate_line(pkey: paramiko.PKey) -> str | None:
    """The certificate the key offers, as OpenSSH's CertificateFile wants it."""
    blob = pkey.public_blob
    if blob is None or not blob.key_type.endswith("-cert-v01@openssh.com"):
        return None
    return f"{blob.key_type} {base64.b64encode(blob.key_blob).decode()}\n"
