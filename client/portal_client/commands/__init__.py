"""The ``portal`` command's groups of subcommands, one module each (pip's layout): each
module's ``add_to(commands)`` adds its subcommands to the parser, each with the function
that runs it (``run``: ``(client, args, out) -> exit status``). The table's order is
``portal --help``'s."""

from __future__ import annotations

import argparse
import importlib

# module -> the subcommands it adds
COMMANDS: dict[str, tuple[str, ...]] = {
    "submit": ("submit",),
    "jobs": ("jobs", "show", "logs", "cancel", "tag", "note"),
    "compare": ("compare",),
    "imports": ("import",),
    "usage": ("usage",),
    "sessions": ("open", "share", "shares", "unshare"),
    "catalog": ("containers", "apps", "clusters"),
    "sweeps": ("sweep",),
    "models": ("models",),
    "retention": ("retention",),
    "endpoints": ("endpoints",),
    "keys": ("keys",),
    "ssh": ("ssh",),
    "transfers": ("remotes", "transfer"),
    "login": ("login",),
}


def add_all(commands: argparse._SubParsersAction) -> None:
    for module in COMMANDS:
        importlib.import_module(f"{__name__}.{module}").add_to(commands)
