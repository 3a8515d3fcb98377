"""One archive that brings the portal's database back: ``manage.py backup`` and
``manage.py restore`` (ops/management/commands).

The archive is a tar file of two members: ``manifest.json`` (what was saved, from which
code and schema, how many rows of what, and the settings a restore must match, never a
secret: the encryption keys and the SSH CAs only by fingerprint) and the database, as
``pg_dump``'s custom format for PostgreSQL or a copy made by SQLite's online backup API.
A restore goes into an empty database of the same engine; its code may be newer (then
``manage.py migrate`` takes the schema on). What the archive does not hold, and must be
kept beside it, is in docs/run/operating.md: the CA keys, the encryption
keys, SECRET_KEY, the HAProxy certificates.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

FORMAT = 1
MANIFEST = "manifest.json"
MANIFEST_MAX = 1024 * 1024
DATABASE = {"postgresql": "database.pgdump", "sqlite": "database.sqlite3"}
# What a restore is compared by (rows of each).
COUNTED = (
    "auth.User",
    "jobs.Cluster",
    "jobs.ClusterAccount",
    "jobs.Job",
    "jobs.JobEvent",
    "jobs.AuditEvent",
    "jobs.ApiToken",
    "metrics.MetricSeries",
    "metrics.MetricPoint",
    "experiments.Experiment",
    "projects.Project",
)


class BackupError(Exception):
    """The backup or restore cannot be done: the message says why and what to do."""


def fingerprint(secret: str) -> str:
    """A short fingerprint of a key: enough to tell two apart, nothing to recover it by."""
    return hashlib.sha256(f"portal-backup:{secret}".encode()).hexdigest()[:16]


def counts() -> dict[str, int]:
    found = {}
    for label in COUNTED:
        try:
            model = apps.get_model(label)
        except LookupError:
            continue
        found[label] = model.objects.count()
    return found


def _code_version() -> str:
    try:
        done = subprocess.run(  # noqa: S603 (fixed arguments)
            ["git", "-C", str(settings.BASE_DIR), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def _ca_fingerprints() -> list[str]:
    from clusters import certs

    found = []
    for path in settings.PORTAL_SSH_CA_KEY_FILES:
        try:
            found.append(certs.fingerprint(certs.load_ca(path)))
        except Exception:  # noqa: BLE001 - an unreadable CA file is the restore's to report
            found.append(f"unreadable: {path}")
    return found


def manifest() -> dict:
    applied = sorted(
        f"{app}.{name}" for app, name in MigrationRecorder(connection).applied_migrations()
    )
    return {
        "format": FORMAT,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "code": _code_version(),
        "engine": connection.vendor,
        "migrations": applied,
        "counts": counts(),
        "settings": {
            "PORTAL_URL": settings.PORTAL_URL,
            "PROXY_SESSION_DOMAIN": getattr(settings, "PROXY_SESSION_DOMAIN", ""),
            "TIME_ZONE": settings.TIME_ZONE,
            "PORTAL_SSH_CA_FINGERPRINTS": _ca_fingerprints(),
            "PORTAL_ENCRYPTION_KEY_FINGERPRINTS": [
                fingerprint(key) for key in settings.PORTAL_ENCRYPTION_KEYS
            ],
        },
    }


# --- the database's own tools -----------------------------------------------------------


def _pg_environment() -> dict[str, str]:
    """libpq's variables for the configured database: its password never on a command line."""
    db: dict[str, Any] = dict(settings.DATABASES["default"])
    env = {**os.environ, "PGDATABASE": str(db["NAME"]), "PGCONNECT_TIMEOUT": "10"}
    for key, variable in (("HOST", "PGHOST"), ("PORT", "PGPORT"), ("USER", "PGUSER")):
        if db.get(key):
            env[variable] = str(db[key])
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = str(db["PASSWORD"])
    return env


def _tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise BackupError(f"{name} is missing: install PostgreSQL's client (postgresql-client)")
    return path


def _run(argv: list[str]) -> None:
    # (argv: a PostgreSQL tool and paths of our own; the database's name from settings)
    done = subprocess.run(argv, env=_pg_environment(), capture_output=True, text=True)  # noqa: S603
    if done.returncode != 0:
        raise BackupError(f"{Path(argv[0]).name} failed: {done.stderr.strip()[-2000:]}")


def _sqlite_path() -> str:
    return str(settings.DATABASES["default"]["NAME"])


def _copy_sqlite(source: str, target: str) -> None:
    """An online, consistent copy (SQLite's backup API: writers wait, never corrupt it)."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


# --- backup and restore ---------------------------------------------------------------------


def backup(target: Path) -> dict:
    """Write the archive to ``target`` (made private, complete or not at all); its manifest."""
    engine = connection.vendor
    if engine not in DATABASE:
        raise BackupError(f"no backup for a {engine} database")
    target = target.resolve()
    described = manifest()
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".portal-backup-") as tmp:
        data = Path(tmp) / DATABASE[engine]
        if engine == "postgresql":
            _run([_tool("pg_dump"), "--format=custom", "--no-owner", "--no-acl", f"--file={data}"])
        else:
            connection.close()
            _copy_sqlite(_sqlite_path(), str(data))
        (Path(tmp) / MANIFEST).write_text(json.dumps(described, indent=1))
        partial = Path(tmp) / "archive.tar"
        with tarfile.open(partial, "w:gz" if engine == "sqlite" else "w") as tar:
            tar.add(Path(tmp) / MANIFEST, arcname=MANIFEST)
            tar.add(data, arcname=data.name)
        partial.chmod(0o600)
        partial.replace(target)
    return described


def read_manifest(archive: tarfile.TarFile) -> dict:
    member = _member(archive, MANIFEST)
    if member.size > MANIFEST_MAX:
        raise BackupError("the archive's manifest is too large to be one of ours")
    stream = archive.extractfile(member)
    assert stream is not None  # (a regular file: _member)
    try:
        described = json.loads(stream.read(MANIFEST_MAX))
    except ValueError:
        raise BackupError("the archive's manifest is not JSON") from None
    if not isinstance(described, dict) or described.get("format") != FORMAT:
        raise BackupError(f"the archive is not a backup of format {FORMAT}")
    return described


def _member(archive: tarfile.TarFile, name: str) -> tarfile.TarInfo:
    """A regular file of the archive by its exact name (never a link, a device or a path
    elsewhere: nothing of an archive is extracted by its own names)."""
    try:
        member = archive.getmember(name)
    except KeyError:
        raise BackupError(f"the archive has no {name}") from None
    if not member.isreg():
        raise BackupError(f"{name} in the archive is not a regular file")
    return member


def _empty() -> bool:
    return not connection.introspection.table_names()


def restore(source: Path) -> dict:
    """Bring the archive at ``source`` into the configured database, which must be empty and
    of the archive's engine; the manifest, with ``warnings`` (keys that differ)."""
    try:
        archive = tarfile.open(source, "r:*")
    except (OSError, tarfile.TarError) as exc:
        raise BackupError(f"{source} is not a backup archive: {exc}") from None
    with archive:
        described = read_manifest(archive)
        engine = described.get("engine")
        if engine != connection.vendor or engine not in DATABASE:
            raise BackupError(
                f"the archive holds a {engine} database; this portal's is {connection.vendor}: "
                "restore into a database of the same engine"
            )
        if not _empty():
            raise BackupError(
                "the database is not empty: restore into a new, empty database "
                "(nothing was changed)"
            )
        member = _member(archive, DATABASE[engine])
        stream = archive.extractfile(member)
        assert stream is not None
        with tempfile.TemporaryDirectory(prefix=".portal-restore-") as tmp:
            data = Path(tmp) / DATABASE[engine]
            with open(data, "wb") as out:
                shutil.copyfileobj(stream, out, 1024 * 1024)
            connection.close()  # (nothing of this process holds the database meanwhile)
            if engine == "postgresql":
                _run(
                    [
                        _tool("pg_restore"),
                        "--no-owner",
                        "--no-acl",
                        "--exit-on-error",
                        "--single-transaction",
                        f"--dbname={settings.DATABASES['default']['NAME']}",
                        str(data),
                    ]
                )
            else:
                _copy_sqlite(str(data), _sqlite_path())
    connection.close()
    described["warnings"] = _warnings(described)
    return described


def _warnings(described: dict) -> list[str]:
    saved = described.get("settings", {})
    warnings = []
    keys = {fingerprint(key) for key in settings.PORTAL_ENCRYPTION_KEYS}
    if not keys & set(saved.get("PORTAL_ENCRYPTION_KEY_FINGERPRINTS", [])):
        warnings.append(
            "none of PORTAL_ENCRYPTION_KEYS is a key the backup was made with: the clusters' "
            "stored keys and secrets will not decrypt (restore the keys kept beside it)"
        )
    if saved.get("PORTAL_SSH_CA_FINGERPRINTS") and set(saved["PORTAL_SSH_CA_FINGERPRINTS"]) != set(
        _ca_fingerprints()
    ):
        warnings.append(
            "PORTAL_SSH_CA_KEY_FILES are not the CAs the backup was made with: clusters that "
            "trust only those refuse this portal's certificates"
        )
    return warnings
