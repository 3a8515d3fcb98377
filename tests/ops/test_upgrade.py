"""Upgrades from the previous release (deploy/previous-release, a worktree of its commit):
its database, made and filled by its own code, migrated by today's and compared; today's
migrations only expand, so the previous release still works on the new schema (and
does, in the test); and two web instances upgraded one at a time behind HAProxy while
requests keep coming, with not one 5xx."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest
from django.db import migrations as ops
from django.db.migrations.loader import MigrationLoader
from django.db.models import NOT_PROVIDED

from devtools import releases
from tests import factories, polling
from tests.ops.upgrade_helpers import POPULATION, ROOT, manage, populate, run_code, snapshot

# What would break the previous release while it still serves on the new schema: a column
# or table it reads going away or renamed (contract in the release after the one that
# stops using it).
CONTRACTING = (ops.RemoveField, ops.DeleteModel, ops.RenameField, ops.RenameModel)


@pytest.fixture(scope="module")
def previous() -> Path:
    return releases.checkout(releases.previous_release())


def _projection(seen: dict) -> dict:
    """What must survive an upgrade whatever fields the API gained: each job's id, name and
    state, each series' points as stored, the experiments' names."""
    return {
        "jobs": sorted((j["id"], j["name"], j["state"]) for j in seen["jobs"]),
        "stored": seen["stored"],
        "experiments": [e["name"] for e in seen["experiments"]["results"]],
    }


def _served_series(seen: dict) -> dict:
    """Each job's series as the API answers them (a job whose metrics it could not answer:
    its error)."""
    return {
        key: sorted((s["key"], s["points"], tuple(s["step"])) for s in value["series"])
        if "series" in value
        else value.get("error", {}).get("code", "no series")
        for key, value in seen.items()
        if key.startswith("metrics ")
    }


@pytest.fixture(params=["postgresql", "sqlite"])
def empty_database(request, tmp_path) -> str:
    """A new empty database of each kind a centre runs: PostgreSQL, and the embedded SQLite
    default (a file of its own)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'upgraded.sqlite3'}"
    return request.getfixturevalue("postgres_databases")()


def test_the_previous_releases_database_upgrades_and_serves(empty_database, previous):
    url = empty_database
    manage(url, "migrate", "--noinput", "-v0", root=previous)
    populate(url, root=previous)
    before = snapshot(url, root=previous)
    migrated = manage(url, "migrate", "--noinput")
    assert "Applying" in migrated.stdout or "No migrations to apply" in migrated.stdout
    after = snapshot(url)
    assert _projection(after) == _projection(before)
    assert after["stored"] and len(after["stored"]) == len(before["stored"])
    # Today's API serves every job's points as they were served before the upgrade. (On
    # SQLite the previous release answered 503 for a job with points: its metrics query is
    # syntax SQLite refuses, 'near "(": syntax error'; today's reads them.)
    served, was_served = _served_series(after), _served_series(before)
    assert all(isinstance(series, list) for series in served.values()), served
    for key, series in was_served.items():
        assert series == served[key] or (url.startswith("sqlite") and series == "unavailable")
    run_code(url, POPULATION + "\nsmoke()\n")
    # The rolling upgrade's premise: the previous release writes on the new schema...
    made = int(run_code(url, POPULATION + "\nwrite_after_upgrade()\n", root=previous).split()[-1])
    # ... and today's code reads what it wrote.
    seen = snapshot(url)
    assert made in [job["id"] for job in seen["jobs"]]
    run_code(url, POPULATION + "\nsmoke()\n")


def test_migrations_since_the_previous_release_only_expand(previous):
    loader = MigrationLoader(None, ignore_no_migrations=True)
    new = []
    for (app, name), migration in loader.disk_migrations.items():
        module, _ = loader.migrations_module(app)
        if not ROOT.joinpath(*module.split(".")).is_dir():
            continue
        folder = releases.migrations_folder(previous, app, module)
        if folder is not None and (folder / f"{name}.py").exists():
            continue
        new.append(f"{app}.{name}")
        for operation in migration.operations:
            assert not isinstance(operation, CONTRACTING), (
                f"{app}.{name}: {operation.describe()} would break the previous release "
                "while it serves beside this one; do it in the release after"
            )
            if isinstance(operation, ops.AddField):
                field = operation.field
                assert field.null or field.db_default is not NOT_PROVIDED, (
                    f"{app}.{name}: {operation.describe()} is NOT NULL without a database "
                    "default: the previous release's inserts would fail (db_default=...)"
                )
    assert new, "no migration since the previous release: move deploy/previous-release on"


@pytest.mark.django_db(transaction=True)
@pytest.mark.devcluster
def test_two_web_instances_upgraded_one_at_a_time_answer_no_5xx(
    previous, devcluster, owner, tmp_path
):
    from django.core.management import call_command
    from django.test import Client

    from identity.tokens import ApiToken
    from tests.livestack import MultiStack

    # Rows made by today's code first (its models write today's columns), then the
    # database back to the previous release's schema, as it was before the upgrade.
    for _ in range(3):
        factories.training_job(owner, devcluster, "completed").save()
    browser = Client()
    browser.force_login(owner)
    cookie = browser.cookies["sessionid"].value
    _, token = ApiToken.issue(owner, "load")
    stack = MultiStack(tmp_path, root=previous)
    seen: Counter = Counter()
    versions: Counter = Counter()
    stop = threading.Event()

    def load() -> None:
        with httpx.Client(base_url=stack.url, timeout=30) as http:
            while not stop.is_set():
                for path, headers in (
                    ("/", {"Cookie": f"sessionid={cookie}"}),
                    ("/api/v1/jobs/", {"Authorization": f"Bearer {token}"}),
                ):
                    try:
                        answer = http.get(path, headers=headers)
                    except httpx.HTTPError as exc:
                        seen[f"error {type(exc).__name__} on {path}"] += 1
                        continue
                    seen[answer.status_code] += 1
                    versions["new" if "X-Request-ID" in answer.headers else "previous"] += 1

    runner = None
    try:
        for app, name in releases.schema_of(previous).items():  # the previous release's schema
            call_command("migrate", app, name, verbosity=0)
        stack.start()
        runner = threading.Thread(target=load, daemon=True)
        runner.start()
        polling.until(lambda: versions["previous"] >= 20, 60, "requests to the previous release")
        call_command("migrate", verbosity=0)  # expand: the previous release keeps serving
        for web in stack.WEBS:
            stack.set_server_state(web, "maint")  # drained: HAProxy sends it nothing new
            stack.restart(web, root=ROOT)
            polling.until(
                lambda web=web: httpx.get(f"{stack.web_urls[web]}/readyz").status_code == 200,
                90,
                f"{web} with today's code to be ready",
                interval=0.3,
                ignoring=(httpx.HTTPError,),
            )
            stack.set_server_state(web, "ready")
            polling.until(
                lambda web=web: stack.portal_servers()[stack.server_of(web)],
                30,
                f"HAProxy to send {web} requests again",
                interval=0.3,
            )
        for name in (*stack.WORKERS, "beat"):
            stack.restart(name, root=ROOT)
        served = versions["new"]
        polling.until(lambda: versions["new"] >= served + 20, 60, "requests to today's code")
    finally:
        stop.set()
        if runner is not None:
            runner.join(60)  # (its last request answered before the stack goes)
        stack.stop()
        call_command("migrate", verbosity=0)  # (today's schema for the tests after it)
    failures = {
        status: n for status, n in seen.items() if not (isinstance(status, int) and status < 500)
    }
    assert not failures, f"{failures} among {sum(seen.values())} requests"
    assert seen[200] >= 80 and versions["previous"] and versions["new"], (seen, versions)
