"""What runs on the compute node (schedulers/on_node/) must not need the portal: the image's
Python has neither Django nor the portal's modules."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ON_NODE = Path(__file__).resolve().parents[2] / "schedulers" / "on_node"
PORTAL_PACKAGES = {"django", "jobs", "portal", "proxy", "frontend", "rest_framework", "channels"}


def imported_packages(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted(ON_NODE.rglob("*.py")), ids=lambda p: p.name)
def test_code_for_the_compute_node_imports_nothing_of_the_portal(path):
    assert not imported_packages(path) & PORTAL_PACKAGES


def test_the_metrics_client_imports_alone(tmp_path):
    # Run from an empty folder with only the client beside it, as the job script places it.
    (tmp_path / "portal_metrics.py").write_bytes((ON_NODE / "portal_metrics.py").read_bytes())
    done = subprocess.run(
        [sys.executable, "-I", "-c", "import sys; sys.path.insert(0, '.'); import portal_metrics"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
