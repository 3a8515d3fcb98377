"""portal sweep create, list, show, cancel, relaunch: experiments."""

from __future__ import annotations

import time

from portal_client import common
from portal_client.api import Client, PortalError
from portal_client.common import Output, job_id


def _experiment_line(e: dict) -> list[str]:
    best = e.get("best") or {}
    return [
        str(e["id"]),
        e.get("name") or "-",
        e["state"] + (" (cancelling)" if e.get("cancelling") else ""),
        e["method"] + (f", {e['folds']}-fold" if e.get("folds", 1) > 1 else ""),
        f"{e['goal']} {e['metric']}",
        f"{e['trials_started']}/{e['max_trials']}",
        f"{common.fmt(best.get('value'))} (trial {best['number']})" if best else "-",
    ]


EXPERIMENT_HEADER = ["ID", "NAME", "STATE", "METHOD", "OBJECTIVE", "TRIALS", "BEST"]


def cmd_sweep_create(client: Client, args, out: Output) -> int:
    try:
        with open(args.spec, encoding="utf-8") as fh:
            text = fh.read(1 << 20)
    except OSError as exc:
        raise PortalError(f"cannot read {args.spec}: {exc.strerror}") from None
    experiment = client.create_experiment(text)
    out.data(experiment, f"experiment {experiment['id']}: started ({experiment['url']})")
    if not args.wait:
        return 0
    while experiment["state"] == "running":
        time.sleep(args.interval)
        experiment = client.experiment(experiment["id"])
        out.note(
            f"experiment {experiment['id']}: {experiment['trials_started']}/"
            f"{experiment['max_trials']} trials, "
            + ", ".join(f"{n} {k}" for k, n in sorted(experiment["counts"].items()))
        )
    out.data(
        experiment, f"experiment {experiment['id']}: {experiment['state']}. {experiment['message']}"
    )
    return 0 if experiment["state"] == "completed" else 1


def cmd_sweep_list(client: Client, args, out: Output) -> int:
    page = client.experiments()
    rows = [_experiment_line(e) for e in page["results"]]
    out.rows(page, rows, EXPERIMENT_HEADER, "no experiments")
    return 0


def cmd_sweep_show(client: Client, args, out: Output) -> int:
    e = client.experiment(args.id)
    names = list(e["parameters"])
    rows = [
        [
            str(t["number"]),
            t["state"],
            *(common.fmt(t["params"].get(n)) for n in names),
            common.fmt(t["value"])
            + (f" ± {common.fmt(t['value_std'])}" if t["value_std"] is not None else ""),
            (t["message"] or "")[:60],
        ]
        for t in e["trials"]
    ]
    text = "\n".join(
        [
            common.table([_experiment_line(e)], EXPERIMENT_HEADER),
            e["message"] or "",
            "",
            common.table(rows, ["TRIAL", "STATE", *names, e["metric"].upper(), "NOTE"])
            if rows
            else "no trials yet",
        ]
    )
    out.data(e, text)
    return 0


def cmd_sweep_cancel(client: Client, args, out: Output) -> int:
    e = client.experiment(args.id, "cancel/", method="POST")
    out.data(
        e,
        f"experiment {e['id']}: "
        + ("cancelling" if e["state"] == "running" else f"already {e['state']}"),
    )
    return 0


def cmd_sweep_relaunch(client: Client, args, out: Output) -> int:
    body = {} if args.trial is None else {"trial": args.trial}
    job = client.experiment(args.id, "relaunch/", method="POST", body=body)
    out.data(job, f"job {job['id']}: submitted")
    return 0


def add_to(commands) -> None:
    sweep = commands.add_parser(
        "sweep",
        help="experiments: hyper-parameter sweeps, K-fold",
        description="Experiments: many jobs over a search space, from a spec: name, launch "
        "(a job request, as `portal submit` sends), parameters, method, objective, budget.",
    )
    sweeps = sweep.add_subparsers(dest="sweep_cmd", metavar="ACTION", required=True)
    create = sweeps.add_parser("create", help="start an experiment from a YAML or JSON spec")
    create.add_argument("spec", help="the spec file (YAML or JSON)")
    common.follow_flags(create, interval=5)
    create.set_defaults(run=cmd_sweep_create)
    sweeps.add_parser("list", help="your experiments").set_defaults(run=cmd_sweep_list)
    for name, run, text in (
        ("show", cmd_sweep_show, "an experiment and its trials"),
        ("cancel", cmd_sweep_cancel, "cancel an experiment and its running trials"),
    ):
        action = sweeps.add_parser(name, help=text)
        action.add_argument("id", type=job_id)
        action.set_defaults(run=run)
    relaunch = sweeps.add_parser("relaunch", help="run a trial's configuration again as a job")
    relaunch.add_argument("id", type=job_id)
    relaunch.add_argument("--trial", type=int, help="which trial (default: the best)")
    relaunch.set_defaults(run=cmd_sweep_relaunch)
