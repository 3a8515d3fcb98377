"""Bounds on a structured document a user sends (an experiment's spec, a JSON body), checked
before anything interprets it: how deep it nests, how many values it holds, how long its
texts are and how large its numbers. What is refused is named, never echoed whole."""

from __future__ import annotations

import math

MAX_DEPTH = 20
MAX_NODES = 20_000
MAX_TEXT = 64 * 1024
# Whole numbers beyond a 64-bit integer are no count, limit or seed anyone means; a float
# must be finite (PostgreSQL's JSON cannot hold Infinity or NaN).
MAX_INT = 2**63 - 1


class DocumentError(ValueError):
    """The document is outside the bounds; str() says which, in a sentence."""


def check(
    value: object,
    *,
    max_depth: int = MAX_DEPTH,
    max_nodes: int = MAX_NODES,
    max_text: int = MAX_TEXT,
) -> None:
    """Raise DocumentError if ``value`` (lists, mappings, texts, numbers, true/false, null)
    nests deeper than ``max_depth``, holds more than ``max_nodes`` values, has a text (or a
    mapping's key) longer than ``max_text`` characters, or a number that is not finite or
    beyond ±2⁶³. Iterative, so that a deep document costs no recursion."""
    stack: list[tuple[object, int]] = [(value, 1)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise DocumentError(f"It holds more than {max_nodes} values.")
        if depth > max_depth:
            raise DocumentError(f"It nests more than {max_depth} levels deep.")
        if isinstance(item, bool) or item is None:
            continue
        if isinstance(item, int):
            if not -MAX_INT <= item <= MAX_INT:
                raise DocumentError("A whole number in it is beyond ±2⁶³.")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise DocumentError("A number in it is not finite.")
        elif isinstance(item, (str, bytes)):
            if len(item) > max_text:
                raise DocumentError(f"A text in it is longer than {max_text} characters.")
        elif isinstance(item, (dict, list, tuple)) and nodes + len(stack) + len(item) > max_nodes:
            raise DocumentError(f"It holds more than {max_nodes} values.")
        elif isinstance(item, dict):
            for key, child in item.items():
                stack.append((key, depth + 1))
                stack.append((child, depth + 1))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, depth + 1) for child in item)
        # Anything else (a YAML date) is left to the field that reads it.
