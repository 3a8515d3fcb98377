"""portal compare: runs side by side, what differs, last and best of each metric."""

from __future__ import annotations

import csv
import io

from portal_client import common
from portal_client.api import Client
from portal_client.common import Output


def _cell(value) -> str:
    return " ".join(map(str, value)) if isinstance(value, list) else common.fmt(value)


def compare_rows(data: dict) -> tuple[list[str], list[list[str]]]:
    """The comparison's table: a run per row, the fields that differ, then per metric its
    last value, best and step of best."""
    header = ["ID", "NAME"] + (["GROUP"] if data["options"].get("group") else [])
    header += [c.upper() for c in data["columns"]]
    for m in data["metrics"]:
        header += [f"{m['name']} last", f"{m['name']} {m['goal']}", "at step"]
    rows = []
    for run in data["runs"]:
        row = [str(run["id"]), run["name"]] + (
            [run["group"]] if data["options"].get("group") else []
        )
        row += [_cell(run["fields"].get(c)) for c in data["columns"]]
        for m in data["metrics"]:
            v = run["metrics"].get(m["name"]) or {}
            row += [
                common.fmt(v.get("last")),
                common.fmt(v.get("best")),
                common.fmt(v.get("best_step")),
            ]
        rows.append(row)
    return header, rows


def cmd_compare(client: Client, args, out: Output) -> int:
    options = {"q": " ".join(args.query), "ids": args.ids, "group": args.group, "sort": args.sort}
    data = client.compare(**{k: v for k, v in options.items() if v})
    header, rows = compare_rows(data)
    if args.csv:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
        print(buffer.getvalue(), end="", flush=True)
        return 0
    same = "; ".join(f"{s['field']}={common.fmt(s['value'])}" for s in data["same"])
    text = common.table(rows, header) if rows else "no runs match"
    if rows and same:
        text += f"\nsame for all {len(rows)}: {same}"
    out.data(data, text)
    return 0


def add_to(commands) -> None:
    comp = commands.add_parser(
        "compare",
        help="runs side by side: what differs, last/best of each metric",
        description="QUERY terms: tag:NAME param.lr<0.01 metric.val_accuracy>0.95 "
        "image:SLUG state:completed cluster:NAME after:2026-11-01 before:DATE "
        "experiment:ID id:1,2,3 (all must hold; metric. compares the last value).",
    )
    comp.add_argument("query", nargs="*", help="query terms (see above)")
    comp.add_argument("--ids", help="runs to add: 1,2,3")
    comp.add_argument("--group", help="image, cluster, state, tag:PREFIX or param.NAME")
    comp.add_argument("--sort", help="a column, e.g. param.lr or -metric.loss.best")
    comp.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    comp.set_defaults(run=cmd_compare)
