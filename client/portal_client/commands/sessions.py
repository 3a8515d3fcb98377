"""portal open, share, shares, unshare: a job's session and who else may open it."""

from __future__ import annotations

import webbrowser

from portal_client import common
from portal_client.api import Client, PortalError
from portal_client.common import Output, job_id


def cmd_open(client: Client, args, out: Output) -> int:
    job = client.job(args.id)
    if not common.says(job, "has_session"):
        raise PortalError(
            f"Job {job['id']} is a batch job; only sessions (notebook, TensorBoard, VS Code) "
            "have a link."
        )
    url = job.get("session_url")
    if not url:
        if common.says(job, "is_final"):
            raise PortalError(
                f"Job {job['id']} has ended ({common.state(job)}); its session is gone."
            )
        raise PortalError(
            f"Job {job['id']} is {common.state(job)}; its session link appears once the session runs."
        )
    out.data({"id": job["id"], "session_url": url}, url)
    if args.browser:
        webbrowser.open(url)
    return 0


def cmd_share(client: Client, args, out: Output) -> int:
    if not args.people and not args.project:
        raise PortalError("Name someone to share with, or --project.")
    made = client.share(args.id, args.people, args.project, args.acts_as_me)
    for problem in made.get("problems", []):
        out.note(problem)
    out.data(made, f"job {args.id}: shared with {', '.join(made['shared'])}")
    return 0


def cmd_shares(client: Client, args, out: Output) -> int:
    found = client.shares(args.id)
    rows = [
        [str(s["id"]), s["user"] or "(the project)", "yes" if s["acts_as_owner"] else "no"]
        for s in found["shares"]
    ]
    text = common.table(rows, ["SHARE", "WITH", "ACTS AS YOU"]) if rows else "Not shared."
    opens = [f"opened by {o['user']} at {o['at']} ({o['how']})" for o in found["opens"]]
    out.data(found, "\n".join([text, *opens]))
    return 0


def cmd_unshare(client: Client, args, out: Output) -> int:
    client.unshare(args.id, args.share)
    out.data(
        {"id": args.id, "withdrawn": args.share}, f"job {args.id}: share {args.share} withdrawn"
    )
    return 0


def add_to(commands) -> None:
    open_ = commands.add_parser("open", help="print (or open) a notebook's session link")
    open_.add_argument("id", type=job_id)
    open_.add_argument("--browser", "-b", action="store_true", help="open it in a browser")
    open_.set_defaults(run=cmd_open)

    share = commands.add_parser(
        "share", help="share a running notebook or TensorBoard with colleagues of its project"
    )
    share.add_argument("id", type=job_id)
    share.add_argument("people", nargs="*", metavar="USER", help="portal user names")
    share.add_argument("--project", action="store_true", help="everyone who sees the run")
    share.add_argument(
        "--acts-as-me",
        action="store_true",
        help="needed for a notebook: whoever opens it acts as you on the cluster",
    )
    share.set_defaults(run=cmd_share)
    shares = commands.add_parser("shares", help="a session's shares and who else opened it")
    shares.add_argument("id", type=job_id)
    shares.set_defaults(run=cmd_shares)
    unshare = commands.add_parser("unshare", help="withdraw a share (refused at the next request)")
    unshare.add_argument("id", type=job_id)
    unshare.add_argument("share", type=int, metavar="SHARE")
    unshare.set_defaults(run=cmd_unshare)
