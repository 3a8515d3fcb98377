"""The layering of the scheduler adapters (issue #31), read from the source with ``ast``:
every import of every module of the apps counts, those inside functions and under
TYPE_CHECKING too. jobs/cluster/ (SSH, work directories, the job script's body) knows no
scheduler; the adapters (jobs/slurm/, jobs/htcondor/) build on it, never on each other."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APPS = ("jobs", "proxy", "frontend", "portal")

# Package (prefix of a module's dotted name) -> modules it may not import.
FORBIDDEN = {
    "jobs.htcondor": ("jobs.slurm",),
    "jobs.slurm": ("jobs.htcondor",),
    "jobs.cluster": ("jobs.slurm", "jobs.htcondor", "jobs.schedulers"),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def app_modules() -> dict[str, Path]:
    """Every module of the apps by dotted name, migrations left out."""
    found = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.relative_to(ROOT).parts:
                continue
            found[module_name(path)] = path
    return found


def imported(tree: ast.AST, name: str, is_package: bool) -> set[str]:
    """The dotted names a module imports anywhere in it: ``import a.b`` gives a.b,
    ``from a import b`` gives a and a.b (b may be a module), relative ones resolved."""
    package = name if is_package else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            names.add(origin)
            names.update(f"{origin}.{alias.name}" for alias in node.names)
    return names


def under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def violations() -> list[str]:
    found = []
    for name, path in app_modules().items():
        rules = [bans for package, bans in FORBIDDEN.items() if under(name, package)]
        if not rules:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for target in sorted(imported(tree, name, path.name == "__init__.py")):
            for bans in rules:
                if any(under(target, ban) for ban in bans):
                    found.append(f"{path.relative_to(ROOT)} imports {target}")
    return found


def test_the_adapters_share_the_cluster_layer_and_never_import_each_other():
    assert violations() == []


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_every_layered_package_is_read(package):
    """Not a vacuous pass: each package the rules are about has modules here."""
    assert any(under(name, package) for name in app_modules())


def test_imports_inside_functions_and_relative_ones_count():
    source = """
import jobs.cluster.ssh
from . import parsers
from ..slurm import scripts

def late():
    from jobs.schedulers import for_cluster
"""
    names = imported(ast.parse(source), "jobs.htcondor.submit", is_package=False)
    assert {"jobs.cluster.ssh", "jobs.htcondor.parsers", "jobs.slurm.scripts"} <= names
    assert "jobs.schedulers" in names
