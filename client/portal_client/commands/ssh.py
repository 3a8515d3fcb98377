"""portal ssh: a shell inside a running job with one's own ssh and a short-lived
certificate; every ssh argument the portal sends is checked before ssh sees it."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from pathlib import Path

from portal_client.api import Client, PortalError
from portal_client.common import Output, job_id


def _identity(option: str | None) -> Path:
    """The private key to use: -i, else the first of ~/.ssh/id_ed25519, id_ecdsa, id_rsa."""
    if option:
        return Path(option).expanduser()
    for name in ("id_ed25519", "id_ecdsa", "id_rsa"):
        path = Path("~/.ssh").expanduser() / name
        if path.exists() and path.with_name(f"{name}.pub").exists():
            return path
    raise PortalError("No SSH key found in ~/.ssh; make one with `ssh-keygen -t ed25519`, or -i.")


def cmd_ssh(client: Client, args, out: Output) -> int:
    identity = _identity(args.identity)
    public = identity.with_name(f"{identity.name}.pub")
    try:
        public_key = public.read_text()[: 16 * 1024 + 1]
    except OSError:
        raise PortalError(f"{public} is missing: the portal certifies the key's .pub.") from None
    folder = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "portal" / "ssh"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    certificate_file = folder / f"job-{args.id}-cert.pub"
    known_hosts = folder / "known_hosts"
    command = list(args.command or [])
    issued = client.ssh_certificate(
        args.id,
        public_key=public_key,
        identity_file=str(identity),
        certificate_file=str(certificate_file),
        known_hosts_file=str(known_hosts),
        **({"command": command} if command else {}),
    )
    _write_private(certificate_file, _one_line(issued["certificate"], "certificate"))
    if issued["known_hosts"]:
        _remember_host(known_hosts, _known_hosts_line(issued["known_hosts"]))
    if args.print_config:
        out.data(issued, issued["ssh_config"].rstrip("\n"))
        return 0
    out.note(f"certificate {issued['key_id']} valid until {issued['valid_before']}")
    argv = ["ssh", *checked_ssh_args(issued["ssh_args"])]
    if args.dry_run:
        out.data({"argv": argv}, " ".join(shlex.quote(a) for a in argv))
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp("ssh", argv)
    return 0  # (not reached)


def _write_private(path: Path, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as fh:
        fh.write(text)


# What `portal ssh` lets the portal's answer put on ssh's command line: the options the
# portal itself uses (jobs/node_access.ssh_argv), nothing else. A server that
# answered -oProxyCommand=... or LocalCommand would otherwise run a command here.
_SSH_OPTIONS = ("CertificateFile", "IdentitiesOnly", "UserKnownHostsFile", "StrictHostKeyChecking")


_LOGIN = re.compile(r"[a-z_][a-z0-9_.-]{0,31}@[A-Za-z0-9][A-Za-z0-9.-]{0,252}\Z")


_JUMP = re.compile(r"[a-z_][a-z0-9_.-]{0,31}@[A-Za-z0-9][A-Za-z0-9.-]{0,252}(:[0-9]{1,5})?\Z")


_KNOWN_HOST = re.compile(
    r"(\[[A-Za-z0-9.-]+\]:[0-9]{1,5}|[A-Za-z0-9.-]+) [a-z0-9@.-]{3,64} [A-Za-z0-9+/=]{16,16384}\Z"
)


def checked_ssh_args(args: object) -> list[str]:
    """The portal's ssh arguments if every one is of the forms it sends; PortalError
    naming the first that is not."""
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise PortalError("the portal's answer has no ssh argument list")
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        value = args[i + 1] if i + 1 < len(args) else ""
        if arg == "--":  # the rest: the person's own command, one quoted line
            return [*out, *args[i:]]
        if arg in ("-t", "-T") or (_LOGIN.match(arg) and not arg.startswith("-")):
            out.append(arg)
            i += 1
            continue
        ok = (
            (arg == "-i" and value and "\n" not in value)
            or (arg == "-p" and value.isdigit() and 0 < int(value) < 65536)
            or (arg == "-J" and _JUMP.match(value))
            or (
                arg == "-o"
                and value.split("=", 1)[0] in _SSH_OPTIONS
                and "\n" not in value
                and "=" in value
            )
        )
        if not ok:
            raise PortalError(
                f"the portal's answer has an ssh argument this client does not run: {arg!r}"
            )
        out += [arg, value]
        i += 2
    return out


def _known_hosts_line(line: object) -> str:
    text = line.strip() if isinstance(line, str) else ""
    if not _KNOWN_HOST.match(text):
        raise PortalError(
            "the portal's answer has a known_hosts entry that is not one line of a key"
        )
    return text


def _one_line(text: object, what: str) -> str:
    if not isinstance(text, str) or "\n" in text.strip() or not text.strip():
        raise PortalError(f"the portal's answer has a {what} that is not one line")
    return text.strip() + "\n"


def _remember_host(path: Path, line: str) -> None:
    """Add the login node's pinned key to the portal's own known_hosts (never ~/.ssh's)."""
    known = path.read_text().splitlines() if path.exists() else []
    if line.strip() not in known:
        _write_private(path, "".join(f"{k}\n" for k in [*known, line.strip()] if k))


def add_to(commands) -> None:
    ssh = commands.add_parser(
        "ssh",
        usage="portal ssh [-i KEY] [--print-config] [--dry-run] ID [-- COMMAND [ARGS...]]",
        help="a shell (or COMMAND) inside your running job, with your own ssh",
        description="Fetch a short-lived certificate for your key and SSH into the job's "
        "allocation on its node through the login node (the key must be added: `portal keys "
        "add`). What follows `--` runs instead of a shell.",
    )
    ssh.add_argument("id", type=job_id)
    ssh.add_argument("-i", "--identity", help="private key (default: ~/.ssh/id_ed25519, ...)")
    ssh.add_argument(
        "--print-config",
        action="store_true",
        help="print an ~/.ssh/config stanza for the job (e.g. for VS Code Remote-SSH) instead",
    )
    ssh.add_argument("--dry-run", action="store_true", help="print the ssh command, run nothing")
    ssh.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    ssh.set_defaults(run=cmd_ssh)
