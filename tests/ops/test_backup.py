"""manage.py backup and restore, on PostgreSQL and on SQLite: a populated portal saved,
brought into a new empty database, and its API answering the same jobs, metrics and
experiments as the original; a restore into a database that is not empty, an archive of
another engine and a hostile archive refused with nothing changed."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from tests.ops.upgrade_helpers import ROOT, manage, populate, snapshot


def _round_trip(source: str, target: str, archive: Path) -> tuple[dict, dict, str]:
    manage(source, "migrate", "--noinput", "-v0")
    populate(source)
    saved = manage(source, "backup", str(archive)).stdout
    assert archive.stat().st_mode & 0o077 == 0  # (private)
    restored = manage(target, "restore", str(archive))
    assert "warning" not in restored.stderr, restored.stderr
    manage(target, "migrate", "--noinput", "-v0")  # (nothing to do: the same code)
    return snapshot(source), snapshot(target), saved + restored.stdout


def test_postgresql_backup_restores_into_a_new_database(postgres_databases, tmp_path):
    source, target = postgres_databases(), postgres_databases()
    archive = tmp_path / "portal.backup"
    before, after, said = _round_trip(source, target, archive)
    assert before == after and len(before["jobs"]) == 5
    assert any(series["points"] == 40 for series in before["metrics run 0 ✓"]["series"])
    assert before["experiments"]["results"][0]["name"] == "lr sweep"
    assert "jobs.Job: 5" in said and "metrics.MetricPoint: " in said
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["database.pgdump", "manifest.json"]
        manifest = json.loads(tar.extractfile("manifest.json").read())
    assert manifest["engine"] == "postgresql" and manifest["counts"]["jobs.Job"] == 5
    text = json.dumps(manifest)
    assert "PASSWORD" not in text.upper().replace("PORTAL_ENCRYPTION_KEY_FINGERPRINTS", "")
    from django.conf import settings

    assert all(key not in text for key in settings.PORTAL_ENCRYPTION_KEYS)
    # Into a database that holds something now: refused, nothing changed.
    again = manage(target, "restore", str(archive), check=False)
    assert again.returncode != 0 and "the database is not empty" in again.stderr
    assert snapshot(target) == before


def test_sqlite_backup_restores_into_a_new_file(tmp_path, db):
    source, target = f"sqlite:///{tmp_path / 'a.sqlite3'}", f"sqlite:///{tmp_path / 'b.sqlite3'}"
    archive = tmp_path / "portal.backup"
    before, after, _ = _round_trip(source, target, archive)
    assert before == after and len(before["jobs"]) == 5
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["database.sqlite3", "manifest.json"]


def test_an_archive_of_another_engine_or_hostile_is_refused(postgres_databases, tmp_path):
    target = postgres_databases()
    sqlite = tmp_path / "sqlite.backup"
    with tarfile.open(sqlite, "w") as tar:
        manifest = tmp_path / "manifest.json"
        manifest.write_text(json.dumps({"format": 1, "engine": "sqlite"}))
        tar.add(manifest, arcname="manifest.json")
    refused = manage(target, "restore", str(sqlite), check=False)
    assert (
        refused.returncode != 0 and "restore into a database of the same engine" in refused.stderr
    )
    hostile = tmp_path / "hostile.backup"
    with tarfile.open(hostile, "w") as tar:
        manifest.write_text(json.dumps({"format": 1, "engine": "postgresql"}))
        tar.add(manifest, arcname="manifest.json")
        link = tarfile.TarInfo("database.pgdump")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        tar.addfile(link)
    refused = manage(target, "restore", str(hostile), check=False)
    assert refused.returncode != 0 and "not a regular file" in refused.stderr
    assert not (ROOT / "etc").exists()
    garbage = tmp_path / "garbage.backup"
    garbage.write_bytes(b"\x00" * 100)
    refused = manage(target, "restore", str(garbage), check=False)
    assert refused.returncode != 0 and "is not a backup archive" in refused.stderr
