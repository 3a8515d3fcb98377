"""The floors of the house (pyproject.toml's [tool.importlinter] contracts), checked by
import-linter on the real source, and shown to fail when an import goes the wrong way: a
copy of the apps' modules with one upward import added, one circle, one product import of
the development tooling."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def lint(where: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT), "--config", str(where / "pyproject.toml"), "--no-cache"],
        cwd=where,
        env={**os.environ, "PYTHONPATH": str(where)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def house(tmp_path_factory) -> Path:
    """The apps' Python modules and pyproject.toml, copied (nothing else is read)."""
    copy = tmp_path_factory.mktemp("house")
    shutil.copy(ROOT / "pyproject.toml", copy)
    for package in CONFIG["root_packages"]:
        shutil.copytree(
            ROOT / package,
            copy / package,
            ignore=lambda folder, names: (
                [n for n in names if not n.endswith(".py") and not (Path(folder) / n).is_dir()]
                + ["__pycache__", "static", "templates", "node_modules"]
            ),
        )
    return copy


@pytest.fixture
def fresh(house, tmp_path) -> Path:
    copy = tmp_path / "house"
    shutil.copytree(house, copy)
    return copy


def add_line(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n{line}\n")


def test_every_app_is_on_a_floor():
    """Each root package is a floor's app, or the development tooling: an app added without
    a floor would be checked by nothing."""
    floors = next(c for c in CONFIG["contracts"] if c["id"] == "floors")["layers"]
    on_floors = {app.strip() for floor in floors for app in floor.split("|")}
    assert set(CONFIG["root_packages"]) == on_floors | {"devtools"}
    apps = {p.parent.name for p in ROOT.glob("*/apps.py")} | {"common", "schedulers"}
    assert apps - {"devtools"} <= on_floors


def test_the_house_keeps_its_floors():
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout


def test_an_upward_import_breaks_the_floors(fresh):
    assert lint(fresh).returncode == 0  # the copy, as it is, keeps them
    add_line(fresh / "common" / "text.py", "import frontend.views  # upward")
    result = lint(fresh)
    assert result.returncode == 1
    assert "The floors: each app imports only the floors below it BROKEN" in result.stdout
    assert "common.text -> frontend.views" in result.stdout


def test_a_type_only_or_late_upward_import_counts_too(fresh):
    add_line(
        fresh / "clusters" / "pool.py",
        "def later():\n    from jobs import tasks  # noqa\n    return tasks",
    )
    result = lint(fresh)
    assert result.returncode == 1 and "clusters.pool -> jobs.tasks" in result.stdout
    shutil.copy(ROOT / "clusters" / "pool.py", fresh / "clusters" / "pool.py")
    add_line(
        fresh / "schedulers" / "seam.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import catalog.models",
    )
    result = lint(fresh)
    assert result.returncode == 1 and "schedulers.seam -> catalog.models" in result.stdout


def test_apps_on_one_floor_are_independent(fresh):
    add_line(fresh / "projects" / "sync.py", "import catalog.checks")
    result = lint(fresh)
    assert result.returncode == 1 and "projects.sync -> catalog.checks" in result.stdout


def test_a_circle_inside_an_app_breaks_the_house(fresh):
    add_line(fresh / "schedulers" / "slurm" / "status.py", "from schedulers.slurm import parsers")
    result = lint(fresh)
    assert result.returncode == 1
    assert "No circle inside an app, at any depth BROKEN" in result.stdout
    assert "schedulers.slurm" in result.stdout


def test_the_product_never_imports_the_dev_tooling(fresh):
    add_line(fresh / "ops" / "views.py", "import devtools")
    result = lint(fresh)
    assert result.returncode == 1
    assert "The product never imports its development and load tooling BROKEN" in result.stdout


def test_the_readme_draws_the_floors_from_the_code():
    """README's map of the house is devtools/floors.py's figure, redrawn when a floor or an
    app's summary changes (`python -m devtools.floors`)."""
    from devtools import floors

    readme = (ROOT / "README.md").read_text()
    start = readme.index("<!-- floors:")
    block = readme[start : readme.index("<!-- /floors -->", start)]
    drawn = block.split("```text\n", 1)[1].rsplit("```", 1)[0]
    assert drawn.rstrip("\n") == floors.figure()
    assert all(summary for floor in floors.floors() for summary in map(floors.summary, floor))


def product_modules() -> dict[str, int]:
    """Lines of each module of the product's apps (migrations are not the product's code)."""
    found = {}
    for app in CONFIG["root_packages"]:
        if app == "devtools":
            continue
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" not in path.parts:
                found[str(path.relative_to(ROOT))] = len(path.read_text().splitlines())
    return found


def test_no_app_holds_more_than_a_fifth_of_the_product():
    modules = product_modules()
    total = sum(modules.values())
    shares = {
        app: sum(n for path, n in modules.items() if path.startswith(app + "/")) / total
        for app in CONFIG["root_packages"]
        if app != "devtools"
    }
    assert total > 30_000 and max(shares.values()) <= 0.20, sorted(shares.items())


def test_every_module_over_500_lines_is_listed_in_the_docs_with_why():
    page = (ROOT / "docs" / "explain" / "architecture.md").read_text()
    listed = page[page.index("Modules stay under 500 lines") :]
    listed = listed[: listed.index("Development tooling")]
    long = sorted(path for path, n in product_modules().items() if n > 500)
    assert long, "the rule is about something"
    assert [path for path in long if f"`{path}`" not in listed] == []
