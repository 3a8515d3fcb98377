"""Where the client finds the portal and its token.

``PORTAL_URL`` / ``PORTAL_TOKEN`` (and ``PORTAL_CA_BUNDLE``) win over the config file,
``$PORTAL_CONFIG`` or ``$XDG_CONFIG_HOME/portal/config.toml`` (``~/.config/portal/config.toml``):

    url = "https://portal.example.org"
    token = "pp_..."
    ca_bundle = "/etc/ssl/my-site-ca.pem"   # optional
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

KEYS = ("url", "token", "ca_bundle")


@dataclass
class Config:
    url: str = ""
    token: str = ""
    ca_bundle: str = ""
    path: Path | None = None  # the config file, if one was read


def config_path(env=os.environ) -> Path:
    if env.get("PORTAL_CONFIG"):
        return Path(env["PORTAL_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "portal" / "config.toml"


class ConfigError(Exception):
    pass


_LINE = re.compile(r'^\s*([A-Za-z_]+)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:#.*)?\Z')


def parse(text: str, where: str = "config") -> dict[str, str]:
    """The small subset of TOML the file uses: ``key = "string"`` lines and comments.
    (tomllib would do, but it is Python 3.11+ and this client runs on 3.9.)"""
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            raise ConfigError(
                f'{where}, line {number}: expected key = "value", got {line.strip()!r}'
            )
        key, raw = match.groups()
        if key not in KEYS:
            raise ConfigError(
                f"{where}, line {number}: unknown key {key!r} (use {', '.join(KEYS)})"
            )
        try:
            values[key] = json.loads(f'"{raw}"')
        except ValueError:
            raise ConfigError(f"{where}, line {number}: bad escape in {raw!r}") from None
    return values


def render(values: dict[str, str]) -> str:
    lines = ["# Written by `portal login`. Environment variables PORTAL_URL/PORTAL_TOKEN win."]
    lines += [f"{key} = {json.dumps(values[key])}" for key in KEYS if values.get(key)]
    return "\n".join(lines) + "\n"


def load_config(env=os.environ) -> Config:
    path = config_path(env)
    values: dict[str, str] = {}
    read = None
    if path.is_file():
        try:
            values = parse(path.read_text(encoding="utf-8"), str(path))
        except OSError as exc:
            raise ConfigError(f"Cannot read {path}: {exc.strerror}") from None
        read = path
    config = Config(path=read, **values)
    config.url = env.get("PORTAL_URL") or config.url
    config.token = env.get("PORTAL_TOKEN") or config.token
    config.ca_bundle = env.get("PORTAL_CA_BUNDLE") or config.ca_bundle
    config.url = config.url.strip().rstrip("/")
    config.token = config.token.strip()
    return config


def save_config(values: dict[str, str], env=os.environ) -> Path:
    """Write the file readable by its owner only (it holds a credential)."""
    path = config_path(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(render(values))
    os.chmod(path, 0o600)
    return path
