"""What the generated reference pages share: Markdown table cells and tables, Django made
ready before a model is imported, the comments written beside a class's members (an enum's
values), and a docstring's reStructuredText literal blocks turned into Markdown."""

from __future__ import annotations

import ast
import inspect
import io
import os
import re
import textwrap
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cell(text: object) -> str:
    """``text`` as one cell of a MyST pipe table: on one line, its ``|`` escaped."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def code(text: object) -> str:
    """``text`` as inline code in a table cell ("" stays empty)."""
    text = str(text)
    return f"`{cell(text)}`" if text else ""


def table(headers: list[str], rows: list[list[object]]) -> list[str]:
    """A MyST pipe table, as lines; each cell already Markdown (``cell``/``code`` it)."""
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(value) for value in row) + " |" for row in rows]
    return out


def django_ready() -> None:
    """Django set up (as the demo: PORTAL_DEMO=1), so models can be imported."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ.setdefault("PORTAL_DEMO", "1")
    import django

    django.setup()


def member_comments(cls: type) -> dict[str, tuple[str, str]]:
    """(comment above, comment beside) of each ``NAME = ...`` in the body of ``cls``, as
    its source writes them: the block of ``#`` lines right above the statement, and the
    ``#`` comment at the end of its lines ("" where there is none)."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    beside: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and lines[token.start[0] - 1].strip() != token.string:
            beside[token.start[0]] = token.string.lstrip("#").strip()
    found = {}
    body = ast.parse(source).body[0]
    for statement in getattr(body, "body", []):
        if not (isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name)):
            continue
        above = []
        number = statement.lineno - 2
        while number >= 0 and lines[number].strip().startswith("#"):
            above.append(lines[number].strip().lstrip("#").strip())
            number -= 1
        side = " ".join(
            beside[n] for n in range(statement.lineno, statement.end_lineno + 1) if n in beside
        )
        found[statement.targets[0].id] = (" ".join(reversed(above)), side)
    return found


def docstring_md(text: str | None) -> str:
    """A docstring as Markdown: its indentation removed and each reStructuredText literal
    block (a paragraph ending ``::`` and the indented lines after it) a fenced Python
    block. Double-backquoted code is already Markdown."""
    lines = inspect.cleandoc(text or "").splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.endswith("::"):
            out.append(line)
            continue
        out += [line[:-1].rstrip(":") + ":" if line.strip() != "::" else "", "", "```python"]
        block: list[str] = []
        while index < len(lines) and (not lines[index].strip() or lines[index][:1] == " "):
            block.append(lines[index])
            index += 1
        out += textwrap.dedent("\n".join(block)).strip("\n").splitlines() + ["```", ""]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def first_paragraph(text: str | None) -> str:
    """A docstring's first paragraph, on one line."""
    return " ".join(inspect.cleandoc(text or "").split("\n\n")[0].split())
