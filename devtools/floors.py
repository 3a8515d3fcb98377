"""The floors of the house as a figure, drawn from the code: the layers of pyproject.toml's
floors contract (import-linter's, top first) and each app's one-line summary (the first
line of its package's docstring). The README's map of the house is this output
(tests/test_floors.py checks that it still is), and so is the docs' architecture page.

    python -m devtools.floors
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def floors(root: Path = ROOT) -> list[list[str]]:
    """The floors, top first, each a list of its apps."""
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["id"] == "floors")["layers"]
    return [[app.strip() for app in layer.split("|")] for layer in layers]


def summary(app: str, root: Path = ROOT) -> str:
    docstring = ast.get_docstring(ast.parse((root / app / "__init__.py").read_text())) or ""
    return docstring.strip().splitlines()[0] if docstring.strip() else ""


def figure(root: Path = ROOT) -> str:
    found = floors(root)
    width = max(len(app) for floor in found for app in floor)
    lines = [
        f"floor  {'app':<{width}}  (imports only the floors below; not its floor's other apps)"
    ]
    for number, floor in zip(range(len(found), 0, -1), found, strict=True):
        lines.append("─────  " + "─" * (width + 2 + 66))
        for index, app in enumerate(floor):
            label = f"{number:>5}" if index == 0 else " " * 5
            lines.append(f"{label}  {app:<{width}}  {summary(app, root)}".rstrip())
    return "\n".join(lines)


def main() -> int:
    print(figure())
    return 0


if __name__ == "__main__":
    sys.exit(main())
