"""The generated page of the in-job metrics client (docs/_ext/reference_client.py) lists
every name ``portal_metrics`` exports and every public method of its classes, compared
with the module itself."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import reference_client  # noqa: E402

SOURCE = ROOT / "schedulers" / "on_node" / "portal_metrics.py"


def exported() -> list[str]:
    """The module's ``__all__``, read from its source."""
    for node in ast.parse(SOURCE.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__":
            return list(ast.literal_eval(node.value))
    raise AssertionError("portal_metrics has no __all__")


def test_every_exported_name_and_public_method_is_on_the_page():
    page = reference_client.client_page()
    listed = re.findall(r"^##+ `([\w.]+)`$", page, re.M)
    names = exported()
    assert len(names) > 10 and [n for n in listed if "." not in n] == names
    tree = ast.parse(SOURCE.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in names:
            methods = [
                f"{node.name}.{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("_")
            ]
            assert methods and methods == [n for n in listed if n.startswith(node.name + ".")]
    # Each entry shows the signature its source writes (its parameters, in order).
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name in names:
        if name in functions:
            block = page.split(f"## `{name}`\n", 1)[1].split("```", 2)[1]
            for argument in functions[name].args.args:
                assert argument.arg in block, (name, argument.arg)


def test_every_public_function_of_the_client_is_exported():
    """A public function added to the module and not to ``__all__`` would miss the page;
    ``parse_nvidia_smi`` is public for the tests only."""
    tree = ast.parse(SOURCE.read_text())
    public = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")
    }
    assert public - set(exported()) == {"parse_nvidia_smi"}
