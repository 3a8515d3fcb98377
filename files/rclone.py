"""rclone as the transfers' engine (files/transfers.py): what a remote may say, the config
file and command a transfer runs on the cluster, and what its log says. Pure: no SSH, no
database; tested on rclone's own output (tests/files/data/rclone-*.log).

A remote's options are a closed list per kind, each value one line of printable text (a
newline in a value would add a line of its own to rclone's config file: another option,
or a section of its own). Passwords are kept encrypted in the portal (common/crypto.py) and
written only into the one transfer's config file, mode 0600 in the person's own folder,
removed when the transfer ends; rclone wants them "obscured" (``rclone obscure``: AES-CTR
under a key published in rclone's source, an encoding, not a protection).
"""

from __future__ import annotations

import base64
import json
import math
import os
import shlex
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from common.text import plain_line

# rclone's fs/config/obscure: the fixed key of ``rclone obscure``.
_OBSCURE_KEY = bytes.fromhex("9c935b48730a554d6bfd7c63c886a92bd390198eb8128afbf4de162b8b95f638")

VALUE_MAX = 1024
SECTION = "remote"  # the one remote in a transfer's config file


class BadRemote(ValueError):
    """An option a remote cannot have (a sentence for the person)."""


def obscure(secret: str) -> str:
    """``rclone obscure``: base64url(iv + AES-256-CTR(secret)), unpadded."""
    iv = os.urandom(16)
    encryptor = Cipher(algorithms.AES(_OBSCURE_KEY), modes.CTR(iv)).encryptor()
    data = iv + encryptor.update(secret.encode()) + encryptor.finalize()
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def reveal(obscured: str) -> str:
    """``rclone reveal`` (for tests)."""
    data = base64.urlsafe_b64decode(obscured + "=" * (-len(obscured) % 4))
    decryptor = Cipher(algorithms.AES(_OBSCURE_KEY), modes.CTR(data[:16])).decryptor()
    return (decryptor.update(data[16:]) + decryptor.finalize()).decode()


# --- kinds of remote ----------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    name: str  # rclone's option name
    label: str
    required: bool = False
    choices: tuple[str, ...] = ()
    check: str = ""  # "url", "host", "port", "path" or ""
    help: str = ""


@dataclass(frozen=True)
class Kind:
    key: str  # rclone's backend type
    label: str
    options: tuple[Option, ...]
    secret: str  # the option the encrypted secret is written as
    secret_label: str
    secret_obscured: bool  # rclone wants it obscured (passwords) or plain (S3 keys)
    extra: tuple[tuple[str, str], ...] = field(default=())


KINDS: dict[str, Kind] = {
    kind.key: kind
    for kind in (
        Kind(
            "sftp",
            "SFTP server",
            (
                Option("host", "Host", required=True, check="host"),
                Option("port", "Port", check="port"),
                Option("user", "User name"),
                Option(
                    "key_file",
                    "Private key file on the cluster",
                    check="path",
                    help="e.g. ~/.ssh/id_ed25519, read by rclone on the cluster as you",
                ),
                Option(
                    "known_hosts_file",
                    "known_hosts file on the cluster",
                    check="path",
                    help="e.g. ~/.ssh/known_hosts: the server's key is then checked",
                ),
            ),
            secret="pass",
            secret_label="Password",
            secret_obscured=True,
        ),
        Kind(
            "webdav",
            "WebDAV server",
            (
                Option("url", "URL", required=True, check="url"),
                Option(
                    "vendor",
                    "Server",
                    choices=("other", "nextcloud", "owncloud", "sharepoint", "rclone"),
                ),
                Option("user", "User name"),
            ),
            secret="pass",
            secret_label="Password",
            secret_obscured=True,
        ),
        Kind(
            "s3",
            "S3-compatible object store",
            (
                Option(
                    "provider",
                    "Provider",
                    required=True,
                    choices=("AWS", "Ceph", "Minio", "Wasabi", "Cloudflare", "Other"),
                ),
                Option("endpoint", "Endpoint URL", check="url", help="empty for AWS"),
                Option("region", "Region"),
                Option("access_key_id", "Access key id"),
            ),
            secret="secret_access_key",
            secret_label="Secret access key",
            secret_obscured=False,
        ),
    )
}


def _one_line(label: str, value: str) -> str:
    value = value.strip()
    if len(value) > VALUE_MAX:
        raise BadRemote(f"{label}: at most {VALUE_MAX} characters.")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in value):
        raise BadRemote(f"{label}: one line of text, without control characters.")
    return value


def _checked(option: Option, value: str) -> str:
    value = _one_line(option.label, value)
    if not value:
        if option.required:
            raise BadRemote(f"{option.label} is needed.")
        return ""
    if option.choices and value not in option.choices:
        raise BadRemote(f"{option.label}: one of {', '.join(option.choices)}.")
    if option.check == "url":
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BadRemote(f"{option.label}: an http:// or https:// address.")
        if "@" in parts.netloc:
            # Options are kept and shown in clear; only the secret field is encrypted.
            raise BadRemote(
                f"{option.label}: the address without a user or password in it; put them "
                "in the remote's user and password fields (the password is kept encrypted)."
            )
    elif option.check == "host":
        if value.startswith("-") or any(c in value for c in " /@:"):
            raise BadRemote(f"{option.label}: a host name or address, nothing else.")
    elif option.check == "port":
        if not value.isdigit() or not 0 < int(value) < 65536:
            raise BadRemote(f"{option.label}: a number from 1 to 65535.")
    elif option.check == "path" and not (value.startswith("/") or value.startswith("~/")):
        raise BadRemote(f"{option.label}: a path starting with / or ~/.")
    return value


def checked_options(kind_key: str, given: dict[str, str]) -> dict[str, str]:
    """The options of a remote of ``kind_key``, checked; only the kind's own names."""
    kind = KINDS.get(kind_key)
    if kind is None:
        raise BadRemote("Not a kind of remote the portal knows.")
    unknown = set(given) - {option.name for option in kind.options}
    if unknown:
        raise BadRemote(f"A {kind.label} has no option {sorted(unknown)[0]!r}.")
    out = {}
    for option in kind.options:
        value = _checked(option, str(given.get(option.name, "")))
        if value:
            out[option.name] = value
    return out


def checked_secret(secret: str) -> str:
    return _one_line("The secret", secret)


def config_text(kind_key: str, options: dict[str, str], secret: str) -> str:
    """A transfer's rclone config file: one section, the checked options, the secret (if
    any) obscured when rclone wants it so."""
    kind = KINDS[kind_key]
    lines = [f"[{SECTION}]", f"type = {kind.key}"]
    for name, value in checked_options(kind_key, options).items():
        lines.append(f"{name} = {value}")
    if secret:
        secret = checked_secret(secret)
        lines.append(f"{kind.secret} = {obscure(secret) if kind.secret_obscured else secret}")
    if kind.key == "s3" and not secret:
        lines.append("env_auth = true")  # the person's own credentials on the cluster
    return "\n".join(lines) + "\n"


# --- a remote path ----------------------------------------------------------------------


def remote_path(path: str) -> str:
    """A path on the remote, as typed: one line, no '..', at most 4,096 bytes."""
    path = _one_line("The remote path", path or "")
    if len(path.encode()) > 4096:
        raise BadRemote("The remote path is too long.")
    if any(part == ".." for part in path.split("/")):
        raise BadRemote("The remote path cannot contain '..'.")
    return path


# --- the command on the cluster -------------------------------------------------------------

CONF = "rclone.conf"
LOG = "log.jsonl"
ERR = "stderr"
PID = "pid"
RC = "rc"
HOST = "host"
LAUNCHED = "launched"
STATE_FILES = (CONF, LOG, ERR, PID, RC, HOST, "rc.tmp")
# The exit status the wrapper writes when it is stopped (cancel): 128 + SIGTERM.
STOPPED = 143


def command(
    rclone: str, source: str, destination: str, extra_flags: Sequence[str] = ()
) -> list[str]:
    """The argv of one copy (never ``sync``: nothing on the destination is deleted)."""
    return [
        rclone,
        "copy",
        source,
        destination,
        "--config",
        CONF,
        "--use-json-log",
        "--log-file",
        LOG,
        "--log-level",
        "INFO",
        "--stats",
        "1s",
        "--stats-log-level",
        "NOTICE",
        "--create-empty-src-dirs",
        *extra_flags,
    ]


def launch_script(state_dir: str, argv: Sequence[str]) -> str:
    """The shell text that starts ``argv`` detached (its own session, so a cancel stops it
    and everything it started; the SSH command returns at once) in ``state_dir``, once:
    a second launch of the same transfer (a retried task) finds ``launched`` and does
    nothing. The wrapper writes its pid, the host, and the exit status at the end; a stop
    (TERM) writes 143. The config file goes when rclone ends, whatever the end."""
    run = " ".join(shlex.quote(a) for a in argv)
    wrapper = (
        f"cd {shlex.quote(state_dir)} || exit 1; "
        f"trap 'kill $child 2>/dev/null; rm -f {CONF}; echo {STOPPED} > rc.tmp; mv -f rc.tmp {RC}; exit {STOPPED}' "
        "HUP INT TERM; child=; "
        f"echo $$ > {PID}; hostname > {HOST}; "
        f"{run} 2> {ERR} & child=$!; wait $child; status=$?; "
        f"rm -f {CONF}; echo $status > rc.tmp; mv -f rc.tmp {RC}"
    )
    quoted_dir = shlex.quote(state_dir)
    return (
        f"cd {quoted_dir} && mkdir {LAUNCHED} 2>/dev/null || exit 0; "
        f"setsid sh -c {shlex.quote(wrapper)} </dev/null >/dev/null 2>&1 &"
    )


def alive_script(pid: int, host: str) -> str:
    """Prints ``alive``, ``gone`` or ``elsewhere`` (this SSH connection reached another
    login node than the one the transfer runs on: only its exit file can tell)."""
    return (
        f'if [ "$(hostname)" != {shlex.quote(host)} ]; then echo elsewhere; '
        f"elif kill -0 {int(pid)} 2>/dev/null; then echo alive; else echo gone; fi"
    )


def stop_script(pid: int) -> str:
    """Stop the transfer's whole session (the wrapper is its leader: its pid is its
    process group's id): TERM (rclone ends cleanly, the wrapper writes 143), then KILL to
    whatever is left of the group a few seconds later."""
    group = f"-{int(pid)}"  # (dash's kill takes neither "--" nor -s with a group)
    return (
        f"kill -TERM {group} 2>/dev/null || exit 0; "
        f"for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 {group} 2>/dev/null || exit 0; "
        f"sleep 0.3; done; kill -KILL {group} 2>/dev/null; true"
    )


# --- what the log says -------------------------------------------------------------------

_INT_MAX = 2**62


def _count(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return int(min(max(value, 0), _INT_MAX))


def _seconds(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return float(min(value, 10**9))


@dataclass
class Progress:
    bytes: int = 0
    total_bytes: int = 0
    files: int = 0
    total_files: int = 0
    errors: int = 0
    speed: float = 0.0  # bytes per second
    eta: float | None = None  # seconds
    elapsed: float = 0.0
    seen: bool = False  # a stats line was found
    last_error: str = ""
    # The last line that is not JSON: rclone logs a fatal error before its JSON logger
    # (a remote it cannot open: "Failed to create file system ...") as plain text.
    last_plain: str = ""

    @property
    def percent(self) -> int:
        if self.total_bytes <= 0:
            return 100 if self.seen and self.total_files == self.files else 0
        return min(100, self.bytes * 100 // self.total_bytes)


def _text(value, limit: int = 300) -> str:
    """A string from rclone's log as one plain bounded line: terminal escapes and control
    characters removed as for a job's own output (common.text.plain_line), what is left of
    format characters and line breaks made spaces."""
    if not isinstance(value, str):
        return ""
    cleaned = "".join(
        " " if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c for c in plain_line(value)
    )
    cleaned = " ".join(cleaned.split())
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def read_log(data: bytes, *, cut: bool) -> Progress:
    """The newest stats and error in the tail of a transfer's JSON log. ``cut``: the tail
    does not start at the file's start (its first line is a piece: dropped). Every line
    is data: one that is not a JSON object of rclone's shape is skipped."""
    progress = Progress()
    lines = data.split(b"\n")
    if cut and lines:
        lines = lines[1:]
    for raw in lines:
        raw = raw.strip()
        if not raw:
            continue
        try:
            line = json.loads(raw) if raw.startswith(b"{") else None
        except ValueError:
            line = None
        if line is None:
            progress.last_plain = first_error(raw) or progress.last_plain
            continue
        if not isinstance(line, dict):
            continue
        stats = line.get("stats")
        if isinstance(stats, dict):
            progress.seen = True
            progress.bytes = _count(stats.get("bytes"))
            progress.total_bytes = _count(stats.get("totalBytes"))
            progress.files = _count(stats.get("transfers"))
            progress.total_files = _count(stats.get("totalTransfers"))
            progress.errors = _count(stats.get("errors"))
            progress.speed = float(_seconds(stats.get("speed")) or 0.0)
            progress.eta = _seconds(stats.get("eta"))
            progress.elapsed = float(_seconds(stats.get("elapsedTime")) or 0.0)
        elif line.get("level") in ("error", "critical"):
            what = _text(line.get("object"), 120)
            message = _text(line.get("msg"))
            progress.last_error = f"{what}: {message}" if what else message
    return progress


def first_error(stderr: bytes) -> str:
    """What rclone said before its log was open (a remote it could not reach, a bad
    flag): the last non-empty line of its stderr, as plain bounded text."""
    for raw in reversed(stderr.decode(errors="replace").splitlines()):
        text = _text(raw)
        if text:
            # "2026/11/27 20:44:08 Failed to create file system ...": drop the date.
            parts = text.split(" ", 2)
            if len(parts) == 3 and parts[0].count("/") == 2 and parts[1].count(":") == 2:
                return parts[2]
            return text
    return ""


# rclone's documented exit codes (docs: "Exit Code").
EXIT_MEANINGS = {
    1: "rclone was given something it could not use",
    2: "rclone failed",
    3: "the folder was not found",
    4: "the file was not found",
    5: "a temporary error (try again later)",
    6: "some files could not be copied",
    7: "a fatal error (wrong credentials, quota or permissions)",
    8: "a transfer limit was reached",
    9: "there was nothing to copy",
}


def exit_meaning(status: int) -> str:
    return EXIT_MEANINGS.get(status, f"rclone ended with status {status}")


def parse_status(data: bytes) -> int | None:
    text = data.decode(errors="replace").strip()
    if not text.isdigit() or len(text) > 3:
        return None
    return int(text)


def parse_pid(data: bytes) -> int | None:
    text = data.decode(errors="replace").strip()
    if not text.isdigit() or len(text) > 9 or int(text) <= 1:
        return None
    return int(text)


def parse_host(data: bytes) -> str:
    text = data.decode(errors="replace").strip()
    return (
        text if text and len(text) <= 253 and all(c.isalnum() or c in "-._" for c in text) else ""
    )
