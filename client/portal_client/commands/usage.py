"""portal usage: GPU-hours and CPU-hours per month."""

from __future__ import annotations

from portal_client import common
from portal_client.api import Client
from portal_client.common import Output


def cmd_usage(client: Client, args, out: Output) -> int:
    filters = {"from": args.since, "to": args.until, "user": args.user, "cluster": args.cluster}
    rows = client.usage(**{k: v for k, v in filters.items() if v})
    lines = [
        [
            r["month"],
            r["user"],
            r["account"] or "-",
            r["cluster"],
            r["jobs"],
            f"{r['gpu_hours']:.2f}",
            f"{r['cpu_hours']:.2f}",
            f"{r['wall_hours']:.2f}",
        ]
        for r in rows
    ]
    header = ["MONTH", "USER", "ACCOUNT", "CLUSTER", "JOBS", "GPU-H", "CPU-H", "WALL-H"]
    total = sum(r["gpu_hours"] for r in rows)
    text = (
        common.table(lines, header) + f"\n{total:.2f} GPU-hours in all"
        if rows
        else "no usage recorded"
    )
    out.data(rows, text)
    return 0


def add_to(commands) -> None:
    use = commands.add_parser("usage", help="GPU-hours and CPU-hours per month (accounting)")
    use.add_argument("--from", dest="since", metavar="YYYY-MM", help="first month")
    use.add_argument("--to", dest="until", metavar="YYYY-MM", help="last month (included)")
    use.add_argument("--user", help="staff: one user's")
    use.add_argument("--cluster")
    use.set_defaults(run=cmd_usage)
