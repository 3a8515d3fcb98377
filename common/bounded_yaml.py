"""YAML (and JSON, which is YAML too) read as bounded data: PyYAML's safe loader without
aliases, beyond documents.MAX_DEPTH / MAX_NODES, or numbers longer than MAX_NUMBER_CHARS,
and no more than MAX_SPEC_BYTES of text. Sweep specs (experiments/spec.py) and the files of
tracked runs (tracking/) are read through it."""

from __future__ import annotations

import yaml

from common import documents

MAX_SPEC_BYTES = 64 * 1024
MAX_NUMBER_CHARS = 40


class SpecError(ValueError):
    """The spec is wrong: ``errors`` maps a field's path ('parameters.lr.low') to why."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


class _Refused(yaml.MarkedYAMLError):
    pass


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader (data only, no tags) without what makes a small text a large
    document: anchors and aliases (&a / *a: each level of aliases multiplies the size), more
    than documents.MAX_DEPTH levels or MAX_NODES values, and numbers of more than
    MAX_NUMBER_CHARS characters (int() of 5,000 digits raises; it would be a 500)."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _Refused(
                None,
                None,
                "anchors and aliases (&name, *name) are not accepted; write the value out",
                event.start_mark,
            )
        self._nodes += 1
        if self._nodes > documents.MAX_NODES:
            raise _Refused(None, None, f"more than {documents.MAX_NODES} values", event.start_mark)
        self._depth += 1
        try:
            if self._depth > documents.MAX_DEPTH:
                raise _Refused(
                    None,
                    None,
                    f"nested more than {documents.MAX_DEPTH} levels deep",
                    event.start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def _bounded_number(self, node):
        if len(node.value) > MAX_NUMBER_CHARS:
            raise _Refused(
                None,
                None,
                f"a number longer than {MAX_NUMBER_CHARS} characters",
                node.start_mark,
            )

    def construct_yaml_int(self, node):
        self._bounded_number(node)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node):
        self._bounded_number(node)
        return super().construct_yaml_float(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)


def load(text: str) -> dict:
    """YAML (JSON is YAML too) -> a mapping. Safe loading: data only, no tags, no aliases,
    bounded in size, depth, values and numbers (_Loader, documents.check)."""
    if len(text.encode()) > MAX_SPEC_BYTES:
        raise SpecError({"spec": f"The spec is larger than {MAX_SPEC_BYTES // 1024} KiB."})
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where else ""
        problem = getattr(exc, "problem", None) or "unreadable"
        raise SpecError({"spec": f"Not valid YAML or JSON{at}: {problem}"}) from None
    except (ValueError, RecursionError):  # a backstop: the loader bounds what raises these
        raise SpecError({"spec": "Not valid YAML or JSON."}) from None
    if not isinstance(data, dict):
        raise SpecError(
            {"spec": "The spec must be a mapping (name: value lines, or a JSON object)."}
        )
    bounded(data)
    return data


def bounded(data: object) -> None:
    """SpecError unless the spec is within documents.check()'s bounds."""
    try:
        documents.check(data)
    except documents.DocumentError as exc:
        raise SpecError({"spec": f"The spec is too large: {exc}"}) from None
