"""Typed readers for settings that come from the environment.

Every reader fails loudly, naming the variable, when a value cannot be used,
so a typo in a deployment stops the process at start-up instead of producing
a half-configured portal.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import overload

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@overload
def env_str(name: str, default: str) -> str: ...
@overload
def env_str(name: str, default: None = None) -> str | None: ...
def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return default if value is None else value


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use 1/0, true/false, yes/no)")


def env_int(
    name: str, default: int, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} must be at least {minimum}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={number} must be at most {maximum}")
    return number


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = (os.environ.get(name) or "").strip() or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} is not one of {', '.join(choices)}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} must be at least {minimum}")
    return number


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    """Comma-separated list; blank items are dropped."""
    value = os.environ.get(name)
    if value is None:
        return list(default or [])
    return [item.strip() for item in value.split(",") if item.strip()]


def env_secret(name: str, default: str | None = None) -> str | None:
    """A secret from NAME, or from the file named by NAME_FILE (Docker/systemd credentials)."""
    value = os.environ.get(name)
    file_name = os.environ.get(f"{name}_FILE")
    if value is not None and file_name is not None:
        raise ImproperlyConfigured(f"set either {name} or {name}_FILE, not both")
    if file_name is not None:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_name!r} cannot be read: {exc}") from None
    return default if value is None else value


def local_secret(path: Path, nbytes: int = 48) -> str:
    """A random secret kept in ``path`` (mode 0600), made on first use. Several processes
    starting at once agree: the file appears whole (written aside, then linked into place,
    which fails if another process won) and everyone reads the one that is there."""
    import secrets

    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_urlsafe(nbytes) + "\n")
    try:
        os.link(tmp, path)  # atomic, and never replaces a file another process made
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_text().strip()


def env_networks(name: str, default: list[str]) -> list[str]:
    """Comma-separated IP networks in CIDR form ("10.0.0.0/8,fd00::/8"), normalised; an
    address with host bits set ("10.0.0.1/8") is refused as a likely typo."""
    import ipaddress

    networks = []
    for item in env_list(name, default):
        try:
            networks.append(str(ipaddress.ip_network(item, strict=True)))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {item!r} is not a network ({exc})") from None
    return networks
