"""portal submit: a job from the catalog, and --wait to follow it to its end."""

from __future__ import annotations

import argparse
import shlex
import sys
import time

from portal_client import common
from portal_client.api import Client, PortalError
from portal_client.common import EPILOG, Output

# `--wait`'s exit status when the job has no exit code of its own (documented in --help).
STATE_EXIT = {"completed": 0, "failed": 1, "submit_failed": 1, "timeout": 124, "cancelled": 143}


def command_text(words: list[str]) -> str:
    """What follows ``--``, as the job's shell will run it. One argument is taken as a
    shell command line ('python a.py && python b.py'); several are quoted word by word, so
    each reaches the job exactly as the local shell passed it."""
    if len(words) == 1:
        return words[0]
    return shlex.join(words)


def parse_minutes(text: str) -> int:
    """Walltime: minutes (90), or with a unit (90m, 2h, 1d), or Slurm's [D-]HH:MM:SS."""
    value = text.strip().lower()
    try:
        if value[-1:] in ("m", "h", "d") and value[:-1].isdigit():
            return int(value[:-1]) * {"m": 1, "h": 60, "d": 1440}[value[-1]]
        if value.isdigit():
            return int(value)
        days, _, clock = value.rpartition("-")
        parts = [int(p) for p in clock.split(":")]
        if len(parts) == 3 and (not days or days.isdigit()):
            hours, minutes, seconds = parts
            total = int(days or 0) * 1440 + hours * 60 + minutes + (1 if seconds else 0)
            if total > 0:
                return total
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a walltime: use minutes (90), 90m, 2h, 1d or HH:MM:SS"
    )


def cmd_submit(client: Client, args, out: Output) -> int:
    fields = {
        "container": args.container,
        "cluster": args.cluster,
        "partition": args.partition,
        "kind": (
            "notebook"
            if args.notebook
            else "tensorboard"
            if args.tensorboard is not None
            else "vscode"
            if args.vscode is not None
            else "app"
            if args.app
            else "batch"
        ),
        "gpus": args.gpus,
        "gpu_type": args.gpu_type,
        "min_gpu_capability": args.gpu_capability,
        "min_gpu_memory_gb": args.gpu_memory,
        "nodes": args.nodes,
        "tasks_per_node": args.tasks_per_node,
        "launcher": args.launcher,
        "cpus": args.cpus,
        "memory_gb": args.mem,
        "time_limit": args.time,
        "account": args.account,
        "workdir": args.workdir,
        "name": args.name,
        "tags": args.tag or None,
        "params": parse_params(args.param) if args.param else None,
        "keep_diff": True if args.keep_diff else None,
        "stage_in": args.stage_in,
        "stage_out": args.stage_out or None,
        "stage_out_to": args.stage_out_to,
    }
    if args.resumable or args.attempts is not None or args.checkpoint_warning is not None:
        # --attempts or --checkpoint-warning alone imply a resumable job.
        fields.update(
            resumable=True,
            max_attempts=args.attempts,
            checkpoint_warning_seconds=args.checkpoint_warning,
        )
    if args.logs and not args.wait:
        raise PortalError("--logs prints the output when the job ends: use it with --wait.")
    sessions = [
        args.notebook,
        args.tensorboard is not None,
        args.vscode is not None,
        bool(args.app),
    ]
    if sum(sessions) > 1:
        raise PortalError("Choose one of --notebook, --tensorboard, --vscode and --app.")
    if args.tensorboard is not None:
        fields["notebook_dir"] = args.tensorboard
    if args.vscode is not None:
        fields["notebook_dir"] = args.vscode
    if args.set and not args.app:
        raise PortalError("--set gives an app's field a value: use it with --app.")
    if args.app:
        fields["app"] = args.app
        fields["app_values"] = app_values(args.set or [])
        if args.folder is not None:
            fields["notebook_dir"] = args.folder
    if args.command:
        if any(sessions):
            raise PortalError("A session runs no command; drop what follows `--`.")
        fields["command"] = command_text(args.command)
    job = client.submit(**fields)
    for warning in job.get("warnings") or []:
        out.note(f"warning: {warning}")
    if not (args.wait and out.as_json):
        out.data(job, str(job["id"]))
    if not args.wait:
        return 0
    status = follow(client, job, args.interval, out)
    if out.as_json:
        # One JSON document, when the wait is over: the job as it ended, with its logs.
        final = client.job(job["id"])
        if args.logs and status != 130:
            final["logs"] = read_output(client, final, failed=status != 0, out=out)
        out.data(final, "")
    elif args.logs and status != 130:
        print_output(client, job, failed=status != 0, out=out)
    return status


def app_values(pairs: list[str]) -> dict[str, str]:
    """``--set name=value`` pairs as an app's values (text: the portal checks each against
    its field's type)."""
    values: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise PortalError(f"--set wants NAME=VALUE, not {pair!r}.")
        values[name] = value
    return values


def param_value(text: str):
    """``--param name=value``'s value: a number, true/false, or the text (as the portal
    reads the launch form's)."""
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    for kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            continue
        if value == value and value not in (float("inf"), float("-inf")):
            return value
    return text


def parse_params(items: list[str]) -> dict:
    params: dict = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise PortalError(f"--param {item!r}: write it as name=value.")
        if name in params:
            raise PortalError(f"--param {name} is given twice.")
        params[name] = param_value(value)
    return params


def read_output(client: Client, job: dict, failed: bool, out: Output) -> dict:
    """--json --logs: the end of stdout (and of stderr when the job failed) as data,
    {stream: {"text", "size", "truncated"}}; a log that cannot be read is said on stderr."""
    logs = {}
    for stream in ["stdout"] + (["stderr"] if failed else []):
        try:
            chunk = client.logs(job["id"], stream)
        except PortalError as exc:
            out.note(f"job {job['id']}: its {stream} could not be read ({exc})")
            continue
        logs[stream] = {k: chunk[k] for k in ("text", "size", "truncated")}
    return logs


def print_output(client: Client, job: dict, failed: bool, out: Output) -> None:
    """The job's stdout on stdout and, when it failed, its stderr on stderr: the end of
    each, as much as the portal serves at once. A log that cannot be read is said on
    stderr and skipped: the exit status stays the job's."""
    job_id = job["id"]
    streams = [("stdout", sys.stdout)] + ([("stderr", sys.stderr)] if failed else [])
    for stream, target in streams:
        try:
            chunk = client.logs(job_id, stream)
        except PortalError as exc:
            out.note(
                f"job {job_id}: its {stream} could not be read ({exc}); "
                f"`portal logs {job_id}{' --stderr' if stream == 'stderr' else ''}` tries again."
            )
            continue
        if chunk["truncated"]:
            out.note(
                f"job {job_id}: {stream}, the last {chunk['size'] - chunk['offset']} of "
                f"{chunk['size']} bytes (the whole file: {job['url'].rstrip('/')}/files/):"
            )
        else:
            out.note(f"job {job_id}: {stream}:")
        target.write(chunk["text"])
        if chunk["text"] and not chunk["text"].endswith("\n"):
            target.write("\n")
        target.flush()


def follow(client: Client, job: dict, interval: float, out: Output) -> int:
    """Print each state change (to stderr) until the job ends; its exit status is ours.
    Changes come from the job's event list, so a state shorter than ``interval`` is
    still shown."""
    job_id = job["id"]
    out.note(f"job {job_id}: {common.state(job)}")
    seen_events: set[int] = set()
    reason = job.get("pending_reason") or ""
    link_shown = False
    try:
        while not common.says(job, "is_final"):
            time.sleep(interval)
            job = client.job(job_id)
            now = job.get("pending_reason") or ""
            for event in job.get("events", []):
                if event["id"] in seen_events:
                    continue
                seen_events.add(event["id"])
                detail = ""
                if event["to_state"] == "pending" and job["state"] == "pending" and now:
                    detail, reason = f" ({now})", now
                elif job.get("node") and event["to_state"] not in ("queued", "pending"):
                    detail = f" on {job['node']}"
                out.note(f"job {job_id}: {event['label']}{detail}")
            if job["state"] == "pending" and now and now != reason:
                out.note(f"job {job_id}: Pending ({now})")
            reason = now
            if job.get("session_url") and not link_shown:
                out.note(f"job {job_id}: session {job['session_url']}")
                link_shown = True
    except KeyboardInterrupt:
        out.note(f"Stopped following job {job_id}; it goes on (`portal cancel {job_id}` stops it).")
        return 130
    if job.get("message") and job["state"] != "completed":
        out.note(f"job {job_id}: {job['message']}")
    return exit_status(job)


def exit_status(job: dict) -> int:
    code = job.get("exit_code")
    if code:
        return max(1, min(int(code), 255))
    if job["state"] == "completed":
        return 0
    return STATE_EXIT.get(job["state"], 1)


def add_to(commands) -> None:
    submit = commands.add_parser(
        "submit",
        help="submit a job; prints its id",
        description="Submit a job. Unset options take the catalog's defaults, as on the "
        "launch page. What follows `--` is run by the job's shell.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    submit.add_argument("--container", "-c", help="catalog slug (see `portal containers`)")
    submit.add_argument(
        "--cluster",
        help="cluster name (see `portal clusters`); omitted, the portal chooses: the default "
        "cluster its administrators marked, else the cluster of your most recent job, else "
        "the first by name, among the clusters you have an account on",
    )
    submit.add_argument("--partition", "-p")
    submit.add_argument("--gpus", "-g", type=int, help="GPUs on each node")
    submit.add_argument("--nodes", "-N", type=int, help="nodes (multi-node training)")
    submit.add_argument(
        "--tasks-per-node", type=int, metavar="N", help="processes (ranks) per node"
    )
    submit.add_argument(
        "--launcher",
        choices=["none", "torchrun", "mpi"],
        help="how the command starts on its nodes (default: the container's)",
    )
    submit.add_argument("--gpu-type")
    submit.add_argument(
        "--gpu-capability",
        metavar="X.Y",
        help="any GPU with at least this compute capability (e.g. 8.0)",
    )
    submit.add_argument(
        "--gpu-memory", type=int, metavar="GB", help="any GPU with at least this much memory"
    )
    submit.add_argument("--cpus", type=int, help="CPUs per task")
    submit.add_argument("--mem", type=int, metavar="GB", help="memory in GB")
    submit.add_argument("--time", "-t", type=parse_minutes, help="walltime: 90, 2h, 01:30:00")
    submit.add_argument(
        "--account",
        "-A",
        help="charged for the job: the Slurm account or HTCondor accounting group "
        "(default: the cluster's)",
    )
    submit.add_argument("--workdir", choices=["home", "scratch"])
    submit.add_argument("--name", "-n")
    submit.add_argument(
        "--resumable",
        action="store_true",
        help="checkpoint when warned before the time limit and requeue (Slurm clusters)",
    )
    submit.add_argument(
        "--attempts", type=int, metavar="N", help="resumable: up to N runs of --time each"
    )
    submit.add_argument(
        "--checkpoint-warning",
        type=int,
        metavar="S",
        help="resumable: warn S seconds before the end",
    )
    submit.add_argument(
        "--app",
        metavar="SLUG",
        help="a session of an app the centre added (portal apps lists them)",
    )
    submit.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="--app: a value of one of its fields (repeat), passed to it as one argument",
    )
    submit.add_argument(
        "--folder", metavar="FOLDER", help="--app: the folder it opens on ({folder})"
    )
    submit.add_argument(
        "--tag", action="append", metavar="TAG", help="tag the run (repeat for several)"
    )
    submit.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="a parameter of the run (repeat): the job reads PORTAL_PARAM_<NAME> and params.json",
    )
    submit.add_argument(
        "--keep-diff",
        action="store_true",
        help="keep the git diff of the job's folder beside the job",
    )
    submit.add_argument(
        "--stage-in",
        metavar="FOLDER",
        help="copy FOLDER (on the cluster: absolute, or inside your home or scratch) to the "
        "node's own disk before the command, checked against its files' sha256 sums; the "
        "job reads it at $PORTAL_STAGED_DIR",
    )
    submit.add_argument(
        "--stage-out",
        action="append",
        metavar="PATH",
        help="after the command, copy PATH (a path or glob in $PORTAL_STAGED_DIR, else the "
        "work directory) back (repeat for several)",
    )
    submit.add_argument(
        "--stage-out-to",
        metavar="FOLDER",
        help="where --stage-out copies to (default: the job's work directory)",
    )
    submit.add_argument("--notebook", action="store_true", help="a notebook session, no command")
    submit.add_argument(
        "--tensorboard",
        metavar="FOLDER",
        help="a TensorBoard session on the runs under FOLDER (in your home; '' for all of it)",
    )
    submit.add_argument(
        "--vscode",
        metavar="FOLDER",
        nargs="?",
        const="",
        help="a VS Code session opened on FOLDER (in your home; none: the home itself)",
    )
    submit.add_argument(
        "--wait",
        "-w",
        action="store_true",
        help="follow the job to its end and exit with its exit code",
    )
    submit.add_argument(
        "--logs",
        "-l",
        action="store_true",
        help="with --wait: print the job's output at the end (and stderr if it failed)",
    )
    submit.add_argument("--interval", type=float, default=3, help=argparse.SUPPRESS)
    submit.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    submit.set_defaults(run=cmd_submit)
