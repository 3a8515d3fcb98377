"""portal remotes, transfer: copies between a cluster and a remote (rclone on the cluster)."""

from __future__ import annotations

import time

from portal_client import common
from portal_client.api import Client
from portal_client.common import Output, job_id

TRANSFER_HEADER = ["ID", "STATE", "DONE", "WHAT", "MESSAGE"]


def _transfer_line(t: dict) -> list[str]:
    done = f"{t['percent']}% of {t['total_bytes']:,} B" if t["total_bytes"] else "-"
    return [str(t["id"]), t["state"], done, t["what"], (t["message"] or "")[:60]]


def cmd_remotes(client: Client, args, out: Output) -> int:
    rows = [[r["name"], r["kind"], "site" if r["site"] else "yours"] for r in client.remotes()]
    out.data(rows, common.table(rows, ["NAME", "KIND", "WHOSE"]) if rows else "no remotes")
    return 0


def cmd_transfer_start(client: Client, args, out: Output) -> int:
    where, _, path = args.folder.partition(":")
    if not path and where not in ("home", "scratch") and not where.startswith("project"):
        where, path = "home", args.folder
    there, _, remote_path = args.remote.partition(":")
    transfer = client.start_transfer(
        cluster=args.cluster,
        root=where,
        path=path,
        remote=there,
        remote_path=remote_path,
        direction="from_remote" if args.fetch else "to_remote",
    )
    out.data(transfer, f"transfer {transfer['id']}: {transfer['what']} ({transfer['state']})")
    if not args.wait:
        return 0
    return _follow(client, transfer, args, out)


def _follow(client: Client, transfer: dict, args, out: Output) -> int:
    while not transfer["final"]:
        time.sleep(args.interval)
        transfer = client.transfer(transfer["id"])
        out.note(f"transfer {transfer['id']}: {' '.join(_transfer_line(transfer)[1:3])}")
    out.data(transfer, f"transfer {transfer['id']}: {transfer['state']}. {transfer['message']}")
    return 0 if transfer["state"] == "done" else 1


def cmd_transfer_list(client: Client, args, out: Output) -> int:
    page = client.transfers()
    rows = [_transfer_line(t) for t in page["results"]]
    out.rows(page, rows, TRANSFER_HEADER, "no transfers")
    return 0


def cmd_transfer_show(client: Client, args, out: Output) -> int:
    transfer = client.transfer(args.id)
    if args.wait:
        return _follow(client, transfer, args, out)
    lines = [" ".join(_transfer_line(transfer))]
    lines += [f"  {e['at'][:19]}  {e['text']}" for e in transfer["events"]]
    out.data(transfer, "\n".join(lines))
    return 0


def cmd_transfer_cancel(client: Client, args, out: Output) -> int:
    transfer = client.transfer(args.id, "cancel/", method="POST")
    out.data(transfer, f"transfer {transfer['id']}: {transfer['state']}")
    return 0


def add_to(commands) -> None:
    commands.add_parser("remotes", help="remotes you may copy to and from").set_defaults(
        run=cmd_remotes
    )
    transfer = commands.add_parser(
        "transfer",
        help="copy folders between a cluster and a remote (rclone on the cluster)",
        description="Copies run on the cluster as you, with rclone; nothing on the "
        "destination is ever deleted. FOLDER is ROOT:PATH (home:data, scratch:run1, "
        "project:<slug>:x) or a path in your home; REMOTE is NAME:PATH (see `portal remotes`).",
    )
    transfer_actions = transfer.add_subparsers(dest="transfer_cmd", metavar="ACTION", required=True)
    start = transfer_actions.add_parser("start", help="copy FOLDER to REMOTE (--fetch: back)")
    start.add_argument("cluster")
    start.add_argument("folder", help="ROOT:PATH on the cluster")
    start.add_argument("remote", help="NAME:PATH on the remote")
    start.add_argument("--fetch", action="store_true", help="copy REMOTE into FOLDER instead")
    common.follow_flags(start, interval=2)
    start.set_defaults(run=cmd_transfer_start)
    transfer_actions.add_parser("list", help="your transfers").set_defaults(run=cmd_transfer_list)
    for name, run, text in (
        ("show", cmd_transfer_show, "a transfer, its progress and timeline"),
        ("cancel", cmd_transfer_cancel, "stop a transfer (rclone stops on the cluster)"),
    ):
        one = transfer_actions.add_parser(name, help=text)
        one.add_argument("id", type=job_id)
        if name == "show":
            common.follow_flags(one, interval=2)
        one.set_defaults(run=run)
