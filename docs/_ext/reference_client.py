"""The in-job metrics client's page: the public API of ``portal_metrics``
(schedulers/on_node/portal_metrics.py, on every job's PYTHONPATH), what its ``__all__``
names, with each signature and docstring, read by importing the file itself (it needs
nothing but the standard library, and importing it starts nothing)."""

from __future__ import annotations

import importlib.util
import inspect
from types import ModuleType

from reference_text import ROOT, docstring_md

SOURCE = ROOT / "schedulers" / "on_node" / "portal_metrics.py"


def client_module() -> ModuleType:
    """schedulers/on_node/portal_metrics.py, imported by its path (not kept in sys.modules)."""
    spec = importlib.util.spec_from_file_location("portal_metrics", SOURCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def public_methods(cls: type) -> list[str]:
    """The methods a class defines itself whose names do not start with ``_``."""
    return [
        name
        for name, value in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(value)
    ]


def _signature(value, method: bool = False) -> str:
    """``value``'s signature as the source writes it (a method's without ``self``)."""
    try:
        signature = inspect.signature(value, eval_str=True)
    except (NameError, TypeError, ValueError):  # an annotation not importable here
        signature = inspect.signature(value)
    if method:
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    return str(signature).replace("portal_metrics.", "")


def _entry(heading: str, line: str, doc: str | None) -> list[str]:
    out = [heading, "", "```python", line, "```", ""]
    return out + ([docstring_md(doc), ""] if doc else [])


def client_page() -> str:
    module = client_module()
    intro = docstring_md(module.__doc__).split("\n\n", 1)
    out = [
        "# The in-job metrics client",
        "",
        "`portal_metrics`, the module a job's script imports to log training metrics: every",
        "name its `__all__` exports, with its signature and docstring, generated at each",
        "build from `schedulers/on_node/portal_metrics.py`.",
        "",
        intro[-1],
        "",
    ]
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value):
            out += _entry(f"## `{name}`", f"class {name}{_signature(value)}", value.__doc__)
            for method in public_methods(value):
                function = getattr(value, method)
                out += _entry(
                    f"### `{name}.{method}`",
                    f"{name}.{method}{_signature(function, method=True)}",
                    function.__doc__,
                )
        else:
            out += _entry(f"## `{name}`", f"{name}{_signature(value)}", value.__doc__)
    return "\n".join(out).rstrip() + "\n"
