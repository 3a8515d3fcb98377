"""The settings' layers (portal/settings/, issue #40): only dev.py and configured.py read
environment variables; computed.py builds from what they read, and __init__.py only
composes them. Read from the source with ``ast``."""

import ast
from pathlib import Path

from portal import env

LAYERS = Path(__file__).resolve().parents[2] / "portal" / "settings"
READERS = {name for name in vars(env) if name.startswith("env_")}


def readers_called(layer: str) -> set[str]:
    tree = ast.parse((LAYERS / layer).read_text())
    return {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in READERS
    }


def test_only_the_dev_and_operator_layers_read_variables():
    assert readers_called("computed.py") == set()
    assert readers_called("__init__.py") == set()
    # Not a vacuous pass: the readers are found where they are.
    assert {"env_str", "env_int", "env_float", "env_bool", "env_list", "env_secret"} <= (
        readers_called("configured.py")
    )
    assert readers_called("dev.py") == {"env_bool", "env_str"}
