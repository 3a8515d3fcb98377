"""portal import: MLflow, W&B or TensorBoard runs from a folder."""

from __future__ import annotations

import tarfile
import tempfile
import time
from pathlib import Path

from portal_client.api import Client, PortalError
from portal_client.common import Output


def pack(folder: Path, into) -> None:
    """``folder`` (or one file) as a .tar.gz in the open file ``into``: regular files and
    folders only (the portal would not read a link anyway)."""

    def regular(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return info if info.isfile() or info.isdir() else None

    with tarfile.open(fileobj=into, mode="w:gz") as tar:
        tar.add(folder, arcname=folder.name, filter=regular)


def cmd_import(client: Client, args, out: Output) -> int:
    folder = Path(args.path).expanduser()
    if not folder.exists():
        raise PortalError(f"{args.path} does not exist.")
    with tempfile.TemporaryFile() as archive:
        pack(folder.resolve(), archive)
        size = archive.tell()
        archive.seek(0)
        run_import = client.start_import(archive, size, f"{folder.resolve().name}.tar.gz")
    out.note(f"import {run_import['id']}: {size / 1e6:.1f} MB sent, importing…")
    while not run_import["is_final"] and not args.no_wait:
        time.sleep(args.interval)
        run_import = client.run_import(run_import["id"])
    report = run_import.get("report") or {}
    lines = [run_import.get("message") or run_import["state"]]
    lines += [f"  not imported: {m}" for m in report.get("messages", [])]
    out.data(run_import, "\n".join(lines))
    return 0 if run_import["state"] != "failed" else 1


def add_to(commands) -> None:
    imp = commands.add_parser(
        "import",
        help="bring in MLflow, W&B or TensorBoard runs from a folder",
        description="Packs PATH (an mlruns folder, an mlflow.db, wandb/offline-run-* folders, "
        "TensorBoard event files, or a folder holding any of them), sends it and waits for the "
        "import; each run becomes an imported job of yours, once.",
    )
    imp.add_argument("path", help="a folder or file")
    imp.add_argument("--no-wait", action="store_true", help="return once it is sent")
    imp.add_argument("--interval", type=float, default=2.0, help="seconds between checks")
    imp.set_defaults(run=cmd_import)
