"""portal retention: a retention policy (yours or a project's), a run's dry run, its
application (what the dry run listed, deleted as you on the cluster)."""

from __future__ import annotations

import time

from portal_client.api import Client
from portal_client.common import Output, follow_flags, job_id

FIELDS = ("keep_best", "metric", "mode", "keep_latest", "patterns")


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def cmd_policy(client: Client, args, out: Output) -> int:
    params = {"project": args.project}
    sent = {f: getattr(args, f) for f in FIELDS if getattr(args, f) is not None}
    if sent:
        policy = client.request("PUT", "retention/policy/", params=params, body=sent)
    else:
        policy = client.request("GET", "retention/policy/", params=params)
    if not policy.get("set"):
        out.data(policy, "no retention policy: set one with --keep-best, --metric, --keep-latest")
        return 0
    text = (
        f"keep the best {policy['keep_best']}"
        + (f" by {policy['metric']} ({policy['mode']})" if policy["metric"] else "")
        + f" and the latest {policy['keep_latest']}; checkpoints: "
        + " ".join(policy["patterns"])
    )
    out.data(policy, text)
    return 0


def _shown(plan: dict) -> str:
    lines = [
        f"plan {plan['id']} of job {plan['job']}: {plan['state']}"
        + (f": {plan['message']}" if plan["message"] else "")
    ]
    for item in plan["checkpoints"]:
        verdict = "keep  " if item["keep"] else "DELETE"
        lines.append(f"{verdict} {_size(item['bytes']):>10}  {item['path']}  ({item['why']})")
    if plan["bytes_on_disk"] is not None:
        lines.append(
            f"{len(plan['checkpoints'])} checkpoints, {_size(plan['bytes_on_disk'])} on disk; "
            f"{sum(not i['keep'] for i in plan['checkpoints'])} to delete, "
            f"{_size(plan['bytes_to_free'])} to free"
        )
    if plan["state"] == "applied":
        lines.append(f"{len(plan['deleted'])} deleted, {_size(plan['bytes_freed'])} freed")
    return "\n".join(lines)


def _followed(client: Client, plan: dict, args) -> dict:
    while args.wait and plan["state"] in ("listing", "applying"):
        time.sleep(args.interval)
        plan = client.request("GET", f"retention/plans/{plan['id']}/")
    return plan


def cmd_plan(client: Client, args, out: Output) -> int:
    sent = {f: getattr(args, f) for f in FIELDS if getattr(args, f) is not None}
    plan = client.request("POST", f"jobs/{args.id}/retention/", body=sent or None)
    plan = _followed(client, plan, args)
    out.data(plan, _shown(plan))
    return 1 if plan["state"] == "failed" else 0


def cmd_show(client: Client, args, out: Output) -> int:
    plan = _followed(client, client.request("GET", f"retention/plans/{args.plan}/"), args)
    out.data(plan, _shown(plan))
    return 0


def cmd_apply(client: Client, args, out: Output) -> int:
    plan = client.request("POST", f"retention/plans/{args.plan}/apply/")
    plan = _followed(client, plan, args)
    out.data(plan, _shown(plan))
    return 1 if plan["state"] == "failed" else 0


def _rule_flags(parser) -> None:
    parser.add_argument("--keep-best", dest="keep_best", type=int, metavar="K")
    parser.add_argument("--metric", help="the metric that says which checkpoints are best")
    parser.add_argument("--mode", choices=("min", "max"), help="min: lower is better")
    parser.add_argument("--keep-latest", dest="keep_latest", type=int, metavar="M")
    parser.add_argument(
        "--pattern",
        dest="patterns",
        action="append",
        metavar="GLOB",
        help="a checkpoint's name (repeat; replaces the policy's list)",
    )


def add_to(commands) -> None:
    retention = commands.add_parser(
        "retention", help="keep the best and latest checkpoints of a run, free the rest"
    )
    what = retention.add_subparsers(dest="retention_cmd", metavar="ACTION", required=True)
    policy = what.add_parser("policy", help="show or set your (or a project's) policy")
    policy.add_argument("--project", type=int, metavar="ID", help="a project's (its managers)")
    _rule_flags(policy)
    policy.set_defaults(run=cmd_policy)
    plan = what.add_parser("plan", help="a dry run on a run: what would go, what it frees")
    plan.add_argument("id", type=job_id, metavar="JOB")
    _rule_flags(plan)
    follow_flags(plan, 1.0)
    plan.set_defaults(run=cmd_plan)
    show = what.add_parser("show", help="a plan")
    show.add_argument("plan", type=int)
    follow_flags(show, 1.0)
    show.set_defaults(run=cmd_show)
    apply = what.add_parser("apply", help="delete what a dry run listed (as you, audited)")
    apply.add_argument("plan", type=int)
    follow_flags(apply, 1.0)
    apply.set_defaults(run=cmd_apply)
