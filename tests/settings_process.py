"""portal.settings in a fresh interpreter: what start-up does with a given environment."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    """``code`` in a new interpreter with this environment less the demo/debug switches,
    the secret key and the database, plus ``env``."""
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PORTAL_DEMO", "DEBUG", "SECRET_KEY", "DATABASE_URL"}
    }
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "portal.settings", **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def production_env() -> dict[str, str]:
    """The least a production start needs (neither demo nor debug)."""
    from common.crypto import generate_key

    return {
        "SECRET_KEY": "x" * 50,
        "PORTAL_ENCRYPTION_KEYS": generate_key(),
        "DATABASE_URL": "postgres://u:p@db.example.org:5432/portal",
        "PORTAL_UPSTREAM_NETWORKS": "10.0.0.0/8",
    }
