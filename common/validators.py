"""Strict patterns for every admin- or user-supplied value that ends up in a
job script or a remote command line.

Values are also shell-quoted when they are rendered; these patterns catch
mistakes early, with a message that says what is allowed.
"""

import base64
import re

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.utils.deconstruct import deconstructible

from common import crypto, usermap

# Slurm partition, account, GRES type and feature names.
slurm_name = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z",
    "Use letters, digits, '_', '.' and '-' (up to 64 characters, starting with a letter or digit).",
)

# POSIX user names as useradd accepts them.
posix_username = RegexValidator(
    r"^[a-z_][a-z0-9_.-]{0,31}\Z",
    "A cluster user name is lowercase letters, digits, '_', '.' or '-', "
    "starting with a letter or '_' (at most 32 characters).",
)

# Environment-module names as Lmod/Environment Modules spell them: name/version.
module_name = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9._+-]*(/[A-Za-z0-9][A-Za-z0-9._+-]*)*\Z",
    "A module name is letters, digits, '.', '_', '+', '-' with '/' between name and version "
    "(for example cuda/12.4 or python/3.11.7).",
)

hostname = RegexValidator(
    r"^(?=.{1,253}\Z)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\Z"
    r"|^\d{1,3}(\.\d{1,3}){3}\Z|^\[?[0-9A-Fa-f:]+\]?\Z",
    "Enter a host name (login.cluster.example.org) or an IP address.",
)

_SAFE_PATH = re.compile(r"^/[A-Za-z0-9_.+@=:/-]*\Z")
_IMAGE_URI = re.compile(r"^(docker|oras|library)://[A-Za-z0-9][A-Za-z0-9_.+@=:/-]*\Z")
IMAGE_SCHEMES = ("docker://", "oras://", "library://")


_FOLDER_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_. +@=,-]{0,99}\Z")


# A job's own work directory (<id>-<uid>), or a job array's (a<id>-<uid>, its members' in
# <index> below), which a TensorBoard session may read.
JOB_FOLDER = re.compile(
    r"^\.portal/jobs/(?P<array>a?)(?P<id>[0-9]{1,12})-(?P<uid>[0-9a-f]{10})(/|\Z)"
)
# A session's upstream secret (Jupyter's token, TensorBoard's wrapper secret), from the
# job's registration or connection.json: URL-safe, so it can reach HAProxy's runtime API.
SESSION_TOKEN = re.compile(r"^[A-Za-z0-9_.~-]{16,256}\Z")


def relative_folder(value: str) -> None:
    """A folder inside the user's home or scratch directory: names of letters, digits,
    spaces and _ . + @ = , - between slashes; none starts with a dot (so neither '..'
    nor the portal's own .portal directory), at most 10 deep. The one exception is a
    job's work directory, .portal/jobs/<id>-<uid>[/...] (or a job array's,
    a<id>-<uid>), which only TensorBoard sessions may use (Job.clean)."""
    value = value.strip("/")
    job_folder = JOB_FOLDER.match(value)
    if job_folder:  # the rest, if any, is checked as any folder is
        value = value[job_folder.end() :]
        if not value:
            return
    parts = value.split("/")
    if len(parts) > 10 or not all(_FOLDER_PART.match(p) and p == p.strip() for p in parts):
        raise ValidationError(
            "Enter a folder inside your home directory such as projects/mnist: names of "
            "letters, digits, spaces and _ . + @ = , - separated by /, none starting with a "
            "dot, at most 10 deep.",
            code="invalid_folder",
        )


def path_list(value: str) -> None:
    """Absolute paths separated by ':' (as OOD_QUOTA_PATH), each as absolute_path."""
    for part in value.split(":"):
        if part:
            absolute_path(part)


def absolute_path(value: str) -> None:
    if not _SAFE_PATH.match(value) or "/../" in f"{value}/" or "//" in value:
        raise ValidationError(
            "Enter an absolute path such as /shared/images/pytorch.sif, made of letters, digits "
            "and _ . + @ = : / - (no spaces, no '..', no shell characters).",
            code="invalid_path",
        )


def command_path(value: str) -> None:
    """A program: a bare name found on PATH (``rclone``) or an absolute path."""
    if not re.match(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}\Z", value):
        absolute_path(value)


_FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]{0,63}(=[A-Za-z0-9_.,:/+@%-]{1,200})?\Z")
_FLAG_VALUE = re.compile(r"^[A-Za-z0-9_.,:/+@%-]{1,200}\Z")


def long_flags(value: str) -> None:
    """Long options of a program, separated by spaces: ``--transfers 8 --bwlimit=50M``. Each
    a plain word (no quotes, no shell characters); each reaches the program as an argument
    of its own."""
    for word in value.split():
        if not (_FLAG.match(word) or (_FLAG_VALUE.match(word) and not word.startswith("-"))):
            raise ValidationError(
                f"{word[:40]!r} is not a long option (--name, --name=value or a value after "
                "one) of letters, digits and _ . , : / + @ % -.",
                code="invalid_flags",
            )


def image_location(value: str) -> None:
    """An absolute .sif path or a docker://, oras:// or library:// URI."""
    if value.startswith("/"):
        absolute_path(value)
        return
    if not _IMAGE_URI.match(value):
        raise ValidationError(
            "The image location must be an absolute path (/shared/images/x.sif) or a URI "
            "starting with docker://, oras:// or library:// (no spaces or shell characters).",
            code="invalid_image_location",
        )


_ROOT_TEMPLATE = re.compile(r"^/[A-Za-z0-9_.+@=:/{}-]*\Z")


def work_dir_root(value: str) -> None:
    """An absolute directory, optionally with a {user} placeholder: /scratch/{user}."""
    placeholders = re.findall(r"{[^}]*}", value)
    if any(p != "{user}" for p in placeholders) or not _ROOT_TEMPLATE.match(value):
        raise ValidationError(
            "Enter an absolute directory, optionally with {user} for the cluster user name "
            "(for example /home/{user} or /scratch/{user}); no spaces or shell characters.",
            code="invalid_workdir_root",  # the code clients may know,
        )
    absolute_path(value.replace("{user}", "user"))


# A folder on the compute node: absolute, or an environment variable of the job followed
# by a path. No spaces or shell characters; a variable is expanded by the job's shell.
_NODE_SCRATCH = re.compile(r"^(/|\$[A-Za-z_][A-Za-z0-9_]{0,63}(/|\Z))[A-Za-z0-9_.+@=/-]*\Z")


def node_scratch(value: str) -> None:
    """Where stage-in copies on each node: /local/scratch, $LOCAL_SCRATCH or $VAR/sub."""
    if not _NODE_SCRATCH.match(value) or "/../" in f"{value}/" or "//" in value:
        raise ValidationError(
            "Enter an absolute folder on the compute nodes (/local/scratch) or an environment "
            "variable the job has there, optionally followed by a path ($LOCAL_SCRATCH/jobs); "
            "no spaces, '..' or shell characters.",
            code="invalid_node_scratch",
        )


def project_root(value: str) -> None:
    """An absolute directory with a {project} placeholder: /proj/{project}."""
    placeholders = re.findall(r"{[^}]*}", value)
    if placeholders != ["{project}"] or not _ROOT_TEMPLATE.match(value):
        raise ValidationError(
            "Enter an absolute directory with {project} for the project's (account's) name, "
            "for example /proj/{project}; no spaces or shell characters.",
            code="invalid_project_root",
        )
    absolute_path(value.replace("{project}", "project"))


@deconstructible
class EachItem:
    """Apply a validator to each item of a comma- or newline-separated value."""

    def __init__(self, validator):
        self.validator = validator

    def __call__(self, value: str) -> None:
        for item in split_list(value):
            self.validator(item)

    def __eq__(self, other) -> bool:
        return isinstance(other, EachItem) and self.validator == other.validator


def split_list(value: str) -> list[str]:
    return [item.strip() for item in re.split(r"[,\s]+", value or "") if item.strip()]


def host_key_fingerprint(public_key_line: str) -> str:
    """SHA256 fingerprint, as `ssh-keygen -lf` prints it, of an OpenSSH public key line."""
    return crypto.ssh_fingerprint(base64.b64decode(public_key_line.split()[1], validate=True))


_HOST_KEY_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
)


def host_key(value: str) -> None:
    """A pinned SSH host key: an OpenSSH public key line or its SHA256 fingerprint."""
    value = value.strip()
    if value.startswith("SHA256:"):
        if len(value) != 50:
            raise ValidationError(
                "A SHA256 fingerprint is 'SHA256:' followed by 43 base64 characters, as "
                "`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` prints it."
            )
        return
    parts = value.split()
    if len(parts) < 2 or parts[0] not in _HOST_KEY_TYPES:
        raise ValidationError(
            "Paste the cluster's public host key (a line such as 'ssh-ed25519 AAAA…', from "
            "`ssh-keyscan -t ed25519 HOST` or /etc/ssh/ssh_host_ed25519_key.pub) or its "
            "SHA256 fingerprint."
        )
    try:
        base64.b64decode(parts[1], validate=True)
    except ValueError:
        raise ValidationError("The host key's base64 part is damaged.") from None


def user_map(value: str) -> None:
    """A cluster's user_map parses (common/usermap.py says what it may be)."""
    usermap.parse(value)
