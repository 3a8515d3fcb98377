"""Earlier code beside this checkout: a git worktree of a commit (made once, kept), for
serving or migrating with the code as it was there (bench/'s before-and-after, the
upgrade tests). ``PREVIOUS_RELEASE`` is the release upgrades are tested from
(deploy/previous-release: one commit, moved on at each release)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREVIOUS_RELEASE_FILE = ROOT / "deploy" / "previous-release"


class Unavailable(Exception):
    """The commit is not in this clone's history (a shallow clone): fetch it first."""


def previous_release() -> str:
    return PREVIOUS_RELEASE_FILE.read_text().split()[0]


def checkout(rev: str) -> Path:
    """A worktree of commit ``rev`` in the temporary directory (made once, then reused)."""
    found = subprocess.run(  # noqa: S603 (git, a revision checked by rev-parse)
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if found.returncode != 0:
        raise Unavailable(
            f"commit {rev} is not in this clone ({found.stderr.strip()}): "
            "`git fetch --unshallow` and try again"
        )
    sha = found.stdout.strip()
    where = Path(tempfile.gettempdir()) / f"portal-bench-{sha[:12]}"
    if not (where / "manage.py").exists():
        subprocess.run(  # noqa: S603 (a commit id rev-parse gave)
            ["git", "-C", str(ROOT), "worktree", "add", "--force", "--detach", str(where), sha],
            check=True,
            capture_output=True,
        )
    return where


def migrations_folder(root: Path, app: str, module: str) -> Path | None:
    """Where ``root`` keeps the migrations of app label ``app``: where this checkout does
    (``module``), else wherever the app's folder was then (metrics/ was jobs/metrics/)."""
    here = root.joinpath(*module.split("."))
    if here.is_dir():
        return here
    found = [*root.glob("*/migrations"), *root.glob("*/*/migrations")]
    return next((path for path in found if path.parent.name == app), None)


def schema_of(root: Path) -> dict[str, str]:
    """What to migrate back to for ``root``'s code (a checkout of an earlier commit): for
    each of this project's apps with migrations here that ``root`` lacks, the last one
    ``root`` has ("zero" if none). Django must be set up (this checkout's code reads the
    migrations)."""
    from django.db.migrations.loader import MigrationLoader  # noqa: PLC0415

    loader = MigrationLoader(None, ignore_no_migrations=True)
    here: dict[str, set[str]] = {}
    for app, name in loader.disk_migrations:
        here.setdefault(app, set()).add(name)
    targets = {}
    for app, names in here.items():
        module, _ = loader.migrations_module(app)
        if module is None or not ROOT.joinpath(*module.split(".")).is_dir():
            continue  # Django's own apps and libraries': the same in both checkouts
        folder = migrations_folder(root, app, module)
        there = {p.stem for p in folder.glob("[0-9]*.py")} & names if folder else set()
        if names - there:
            targets[app] = max(there) if there else "zero"
    return targets
