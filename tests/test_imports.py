"""How the apps' modules import one another (issue #31), read from the source with ``ast``.

- Layering: jobs/cluster/ (SSH, work directories, the job script's body) knows no
  scheduler; the adapters (jobs/slurm/, jobs/htcondor/) build on it, never on each other.
  Every import counts here, those inside functions and under TYPE_CHECKING too.
- The product (jobs, proxy, frontend, portal, identity, projects, files) never imports devtools/ (the dev cluster,
  the demo catalog, the load population).
- No cycle: the graph of every import of a project module, at any depth (inside
  functions too: a lazy import is a cycle in disguise; never under ``if TYPE_CHECKING:``,
  which runs no code), has none."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APPS = ("jobs", "proxy", "frontend", "portal", "identity", "projects", "files", "devtools")

# Package (prefix of a module's dotted name) -> modules it may not import.
FORBIDDEN = {
    "jobs.htcondor": ("jobs.slurm",),
    "jobs.slurm": ("jobs.htcondor",),
    "jobs.cluster": ("jobs.slurm", "jobs.htcondor", "jobs.schedulers"),
    # The product never imports its development and load tooling.
    "jobs": ("devtools",),
    "proxy": ("devtools",),
    "frontend": ("devtools",),
    "portal": ("devtools",),
    "identity": ("devtools",),
    "projects": ("devtools",),
    "files": ("devtools",),
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


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(
    tree: ast.AST, name: str, is_package: bool, modules: dict[str, Path]
) -> set[str]:
    """The project modules ``tree`` (module ``name``) imports, outside TYPE_CHECKING blocks."""
    found: set[str] = set()
    package = name if is_package else name.rpartition(".")[0]

    def nearest(target: str) -> str | None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = nearest(alias.name)
                if target:
                    found.add(target)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                # `from pkg import submodule` imports the submodule, else the module itself.
                target = f"{base}.{alias.name}"
                if target not in modules:
                    target = nearest(base) or ""
                if target:
                    found.add(target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = app_modules()
    return {
        name: runtime_imports(
            ast.parse(path.read_text()), name, path.name == "__init__.py", modules
        )
        for name, path in modules.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in import order, the first repeated), or None."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack = [(start, iter(sorted(graph[start])))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                return path[path.index(child) :] + [child]
            elif child not in done:
                stack.append((child, iter(sorted(graph.get(child, ())))))
                path.append(child)
                on_path.add(child)
    return None


def test_no_import_cycle_between_the_apps_modules():
    graph = import_graph()
    assert "jobs.models.job" in graph  # the graph is of the project, not of nothing
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_names_a_cycle_and_only_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
