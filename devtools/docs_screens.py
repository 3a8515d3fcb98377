"""`make docs-screens`: the docs' screenshots, taken again by the browser tests.

The docs show screenshots with ```{screenshot} NAME``` (docs/_ext/screens.py); the e2e
suite takes each with ``screenshot(page, "NAME")``. This runs the test files that take the
names the docs use, then copies what they took (test-artifacts/screenshots/) into
docs/screens/, made smaller (at most 1000 px wide, 256 colours), for a commit.

    python -m devtools.docs_screens          # run the tests, then copy
    python -m devtools.docs_screens --copy   # only copy what the last run took
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SCREENS = DOCS / "screens"
TAKEN = ROOT / "test-artifacts" / "screenshots"
USED = re.compile(r"^[ \t]*```\{screenshot\}[ \t]+(\S+)", re.M)
TAKES = re.compile(r"""screenshot\(\s*\w+,\s*["']([\w-]+)["']""")
WIDTH = 1000


def used() -> dict[str, list[str]]:
    """Each screenshot name the docs use, with the pages that use it."""
    found: dict[str, list[str]] = {}
    for page in sorted(DOCS.rglob("*.md")):
        for name in USED.findall(page.read_text()):
            found.setdefault(name, []).append(str(page.relative_to(ROOT)))
    return found


def takers() -> dict[str, list[str]]:
    """Each screenshot name the e2e tests take, with the test files that take it."""
    found: dict[str, list[str]] = {}
    for test in sorted((ROOT / "tests" / "e2e").glob("test_*.py")):
        for name in TAKES.findall(test.read_text()):
            found.setdefault(name, []).append(str(test.relative_to(ROOT)))
    return found


def shrink(source: Path, target: Path) -> None:
    from PIL import Image

    with Image.open(source) as taken:
        image = taken.convert("RGB")
    if image.width > WIDTH:
        image = image.resize((WIDTH, round(image.height * WIDTH / image.width)))
    image.quantize(colors=256).save(target, optimize=True)


def main(argv: list[str]) -> int:
    names, by_name = used(), takers()
    untaken = sorted(set(names) - set(by_name))
    if untaken:
        print(f"no e2e test takes {untaken}", file=sys.stderr)
        return 1
    if "--copy" not in argv:
        files = sorted({test for name in names for test in by_name[name]})
        command = ["bash", "deploy/run-tests.sh", "-q", *files]  # (our own test files)
        run = subprocess.run(command, cwd=ROOT, check=False)  # noqa: S603
        if run.returncode:
            return run.returncode
    SCREENS.mkdir(exist_ok=True)
    missing = [name for name in names if not (TAKEN / f"{name}.png").is_file()]
    for name in names:
        if name not in missing:
            shrink(TAKEN / f"{name}.png", SCREENS / f"{name}.png")
    for old in SCREENS.glob("*.png"):
        if old.stem not in names:
            old.unlink()
    if missing:
        print(f"the tests took no {missing}", file=sys.stderr)
        return 1
    print(f"{len(names)} screenshots in {SCREENS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
