"""Layer 1 of the settings: the dev/test switches, and what exists only for them.

DEBUG and PORTAL_DEMO decide which defaults the operator layer (configured.py) takes:
the embedded single-machine set-up that `make demo` and `make test` run may make its own
secrets and read the Redis URL `deploy/redis.sh` left in the data directory; a
production start may not, and computed.py stops it when something required is missing.
The helpers below are those demo/debug-only defaults; each does nothing, or gives the
production answer, outside demo and debug.
"""

import base64
import hashlib
import os
from pathlib import Path

from portal.env import env_bool, env_str, local_secret

# Django debug mode (never in production)
DEBUG = env_bool("DEBUG", False)
# Demo mode: the embedded, single-machine set-up `make demo` runs (plain HTTP on localhost).
DEMO_MODE = env_bool("PORTAL_DEMO", False)
INSECURE_DEFAULTS_ALLOWED = DEBUG or DEMO_MODE

# Run tasks in-process instead of through the broker (debugging only).
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# Test runs started together (two checkouts, or two `make test`s) each get their own
# test database; deploy/run-tests.sh sets the suffix (computed.py appends it).
test_db_suffix = env_str("PORTAL_TEST_DB_SUFFIX", "")
# Where `make devcluster` keeps its state (keys, ports) for registration.
DEVCLUSTER_DIR = Path(env_str("PORTAL_DEVCLUSTER_DIR", "/var/lib/portal-devcluster"))
# Where `make condorpool` keeps its state (the trixie root, keys, pool.json).
CONDORPOOL_DIR = Path(env_str("PORTAL_CONDORPOOL_DIR", "/var/lib/portal-condorpool"))


def make_private(data_dir: Path) -> None:
    """Demo and debug: the data directory is made, and kept mode 700 (an install from
    before, made 755, is closed on start-up). Production leaves it as deployed."""
    if INSECURE_DEFAULTS_ALLOWED:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if data_dir.stat().st_uid == os.getuid():
            data_dir.chmod(0o700)


def local_secret_key(data_dir: Path) -> str:
    """Demo and debug: a random key per install, made once (never a constant in the code).
    Production: none ("", which computed.py refuses)."""
    if not INSECURE_DEFAULTS_ALLOWED:
        return ""
    return local_secret(data_dir / "secret_key")


def derived_encryption_keys(secret_key: str) -> list[str]:
    """Demo and debug: one Fernet key derived from SECRET_KEY. Production: none ([], which
    computed.py refuses)."""
    if not INSECURE_DEFAULTS_ALLOWED:
        return []
    digest = hashlib.sha256(b"portal-encryption:" + secret_key.encode()).digest()
    return [base64.urlsafe_b64encode(digest).decode()]


def local_redis_url(data_dir: Path, default: str) -> str:
    """Demo and debug: the URL (with its random password) of the Redis `make demo`/`make test`
    run, left in <data_dir>/redis.url (0600), when it is there. Otherwise ``default``."""
    local = data_dir / "redis.url"
    if INSECURE_DEFAULTS_ALLOWED and local.exists():
        return local.read_text().strip()
    return default
