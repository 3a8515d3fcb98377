"""The ``portal`` command.

    portal submit --container pytorch --partition gpu --gpus 2 --time 60 -- python train.py
    portal jobs | show ID | logs ID [-f] | cancel ID | open ID | containers | clusters | login
    portal sweep create sweep.yaml [--wait] | sweep list | sweep show ID | sweep cancel ID

The portal's address and a personal token come from PORTAL_URL / PORTAL_TOKEN or the
config file written by ``portal login`` (see portal_client.config)."""

from __future__ import annotations

import argparse
import csv
import getpass
import io
import json
import os
import re
import shlex
import sys
import tarfile
import tempfile
import time
import webbrowser
from datetime import datetime
from pathlib import Path

from portal_client import __version__
from portal_client.api import Client, PortalError
from portal_client.config import ConfigError, config_path, load_config, save_config

# `--wait`'s exit status when the job has no exit code of its own (documented in --help).
STATE_EXIT = {"completed": 0, "failed": 1, "submit_failed": 1, "timeout": 124, "cancelled": 143}

EPILOG = """\
configuration:
  PORTAL_URL, PORTAL_TOKEN (and PORTAL_CA_BUNDLE for a site CA) or the file
  ~/.config/portal/config.toml written by `portal login`. Tokens are made on the
  portal's Account page.

exit status:
  0 success; 1 the portal refused or could not be reached (the message says why);
  2 bad usage. With `submit --wait`: the job's exit code; 124 if it ran out of time,
  143 if it was cancelled, 1 if it failed without one or could not be submitted.
"""


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


def _when(value: str | None) -> str:
    if not value:
        return "-"
    try:
        return (
            datetime.fromisoformat(value.replace("Z", "+00:00"))
            .astimezone()
            .strftime("%Y-%m-%d %H:%M")
        )
    except ValueError:
        return value


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), *(line(r) for r in rows)])


def _state(job: dict) -> str:
    label = job.get("state_label") or job["state"]
    if job["state"] == "pending" and job.get("pending_reason"):
        place = f"; #{job['queue_position']} in the queue" if job.get("queue_position") else ""
        label += f" ({job['pending_reason']}{place})"
    return label


def _says(job: dict, field: str) -> bool:
    """A yes/no the portal sends with every job (is_final, has_session): the state
    vocabulary stays on the server."""
    if field not in job:
        raise PortalError(f"This portal does not send '{field}': it is older than this client.")
    return bool(job[field])


class Output:
    def __init__(self, as_json: bool):
        self.as_json = as_json

    def data(self, value, text: str) -> None:
        print(json.dumps(value, indent=2) if self.as_json else text, flush=True)

    @staticmethod
    def note(text: str) -> None:
        print(text, file=sys.stderr, flush=True)


# --- commands --------------------------------------------------------------------------


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


def cmd_tag(client: Client, args, out: Output) -> int:
    change = "add_tags" if args.action == "add" else "remove_tags"
    job = client.annotate(args.id, **{change: args.tags})
    out.data(job, f"job {job['id']}: tags {' '.join(job.get('tags') or []) or '(none)'}")
    return 0


def cmd_note(client: Client, args, out: Output) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    job = client.annotate(args.id, notes=text)
    out.data(job, f"job {job['id']}: note {'saved' if job.get('notes') else 'cleared'}")
    return 0


def _reproduce(job: dict) -> list[tuple[str, object]]:
    """What reproduces the run, as `portal show` lines."""
    found = job.get("reproduce") or {}
    image = found.get("image") or {}
    lines: list[tuple[str, object]] = []
    if image:
        which = (
            f"sha256 {image['sha256']}"
            if image.get("sha256")
            else image.get("digest") or image.get("identity") or image.get("error") or "?"
        )
        lines.append(("Image", f"{image.get('location') or image.get('runtime')} ({which})"))
    git = found.get("git")
    if git:
        state = "modified" if git.get("modified") else "clean"
        lines.append(("Git", f"{git['commit']} ({state}) in {git.get('folder', '?')}"))
    return lines


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
    out.note(f"job {job_id}: {_state(job)}")
    seen_events: set[int] = set()
    reason = job.get("pending_reason") or ""
    link_shown = False
    try:
        while not _says(job, "is_final"):
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


def cmd_jobs(client: Client, args, out: Output) -> int:
    filters = {"page_size": args.limit, "container": args.container}
    if args.state:
        filters["state"] = args.state
    # An experiment's trials are many jobs (one per fold): listed when asked for.
    if args.experiment:
        filters["experiment"] = args.experiment
    elif not args.trials:
        filters["experiment"] = "none"
    page = client.jobs(**filters)
    jobs = page["results"]
    rows = [
        [
            j["id"],
            j["name"] or "-",
            _state(j),
            j["container"],
            f"{j['cluster']}/{j['partition']}",
            _layout(j),
            f"{j['gpus']}x{j['gpu_type']}" if j["gpus"] and j["gpu_type"] else j["gpus"],
            j["node"] or "-",
            _when(j["created_at"]),
        ]
        for j in jobs
    ]
    header = [
        "ID",
        "NAME",
        "STATE",
        "CONTAINER",
        "PARTITION",
        "NODESxTASKS",
        "GPUS/NODE",
        "NODE",
        "CREATED",
    ]
    text = _table(rows, header) if rows else "No jobs."
    if page.get("count", 0) > len(jobs):
        text += f"\n({len(jobs)} of {page['count']}; --limit shows more)"
    out.data(jobs, text)
    return 0


def _layout(job: dict) -> str:
    """'2x2' (nodes × tasks per node); older portals send neither: '1x1'."""
    return f"{job.get('nodes', 1)}x{job.get('tasks_per_node', 1)}"


def cmd_show(client: Client, args, out: Output) -> int:
    job = client.job(args.id)
    fields = [
        ("Job", job["id"]),
        ("Name", job["name"] or "-"),
        ("State", _state(job)),
        ("Kind", job["kind"]),
        ("Container", job["container"]),
        ("Cluster", f"{job['cluster']} / partition {job['partition']}"),
        (
            "Resources",
            (
                f"{job['gpus']} GPU {job['gpu_type'] or job.get('gpu_constraint') or ''}".rstrip()
                if job["gpus"]
                else "no GPU"
            )
            + f", {job['cpus']} CPUs, {job['memory_gb']} GB"
            + (" per node" if job.get("nodes", 1) > 1 else "")
            + f", {job['time_limit']} min",
        ),
        (
            "Layout",
            f"{job.get('shape') or _layout(job)}, launcher {job.get('launcher') or 'none'}",
        ),
        ("Command", job["command"] or "-"),
        *([("Tags", " ".join(job["tags"]))] if job.get("tags") else []),
        *(
            [("Params", " ".join(f"{k}={v}" for k, v in job["params"].items()))]
            if job.get("params")
            else []
        ),
        *_reproduce(job),
        *(
            [("Stage-in", f"{job['stage_in']} (as $PORTAL_STAGED_DIR)")]
            if job.get("stage_in")
            else []
        ),
        *(
            [
                (
                    "Copy back",
                    f"{' '.join(job['stage_out'])} to "
                    f"{job.get('stage_out_to') or 'the work directory'}",
                )
            ]
            if job.get("stage_out")
            else []
        ),
        *([("Note", job["notes"])] if job.get("notes") else []),
        *(
            [
                (
                    "Resumable",
                    f"attempt {job.get('attempt', 0) + 1} of at most {job.get('max_attempts')}, "
                    f"warned {job.get('checkpoint_warning_seconds')} s before each end",
                )
            ]
            if job.get("resumable")
            else []
        ),
        ("Scheduler job", job["scheduler_job_id"] or "-"),
        ("Node", ", ".join(job.get("node_list") or []) or job["node"] or "-"),
        ("Exit code", "-" if job["exit_code"] is None else job["exit_code"]),
        ("Created", _when(job["created_at"])),
        ("Started", _when(job["started_at"])),
        ("Ended", _when(job["ended_at"])),
        ("Message", job["message"] or "-"),
        ("Session", job["session_url"] or "-"),
        ("Page", job["url"]),
    ]
    text = "\n".join(f"{k + ':':<11} {v}" for k, v in fields)
    if job.get("stderr_tail"):  # a failed job: where the cause usually is
        text += "\nLast lines of stderr:\n" + "\n".join(
            "  " + line for line in job["stderr_tail"].splitlines()
        )
    out.data(job, text)
    return 0


def cmd_logs(client: Client, args, out: Output) -> int:
    stream = "stderr" if args.stderr else "stdout"
    chunk = client.logs(args.id, stream)
    if chunk["truncated"]:
        out.note(f"(the last {len(chunk['text'].encode())} of {chunk['size']} bytes)")
    sys.stdout.write(chunk["text"])
    sys.stdout.flush()
    if not args.follow:
        return 0
    try:
        while True:
            final = chunk["final"]
            more = chunk["next_offset"] < chunk["size"]
            if final and not more:
                return 0
            if not more:
                time.sleep(args.interval)
            chunk = client.logs(args.id, stream, offset=chunk["next_offset"])
            sys.stdout.write(chunk["text"])
            sys.stdout.flush()
    except KeyboardInterrupt:
        return 130


def cmd_cancel(client: Client, args, out: Output) -> int:
    job = client.cancel(args.id)
    if _says(job, "is_final"):
        out.data(job, f"job {job['id']}: already ended ({_state(job)})")
    else:
        out.data(job, f"job {job['id']}: cancelling ({_state(job)})")
    return 0


def cmd_open(client: Client, args, out: Output) -> int:
    job = client.job(args.id)
    if not _says(job, "has_session"):
        raise PortalError(
            f"Job {job['id']} is a batch job; only sessions (notebook, TensorBoard, VS Code) "
            "have a link."
        )
    url = job.get("session_url")
    if not url:
        if _says(job, "is_final"):
            raise PortalError(f"Job {job['id']} has ended ({_state(job)}); its session is gone.")
        raise PortalError(
            f"Job {job['id']} is {_state(job)}; its session link appears once the session runs."
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
    text = _table(rows, ["SHARE", "WITH", "ACTS AS YOU"]) if rows else "Not shared."
    opens = [f"opened by {o['user']} at {o['at']} ({o['how']})" for o in found["opens"]]
    out.data(found, "\n".join([text, *opens]))
    return 0


def cmd_unshare(client: Client, args, out: Output) -> int:
    client.unshare(args.id, args.share)
    out.data(
        {"id": args.id, "withdrawn": args.share}, f"job {args.id}: share {args.share} withdrawn"
    )
    return 0


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def _experiment_line(e: dict) -> list[str]:
    best = e.get("best") or {}
    return [
        str(e["id"]),
        e.get("name") or "-",
        e["state"] + (" (cancelling)" if e.get("cancelling") else ""),
        e["method"] + (f", {e['folds']}-fold" if e.get("folds", 1) > 1 else ""),
        f"{e['goal']} {e['metric']}",
        f"{e['trials_started']}/{e['max_trials']}",
        f"{_fmt(best.get('value'))} (trial {best['number']})" if best else "-",
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


TRANSFER_HEADER = ["ID", "STATE", "DONE", "WHAT", "MESSAGE"]


def _transfer_line(t: dict) -> list[str]:
    done = f"{t['percent']}% of {t['total_bytes']:,} B" if t["total_bytes"] else "-"
    return [str(t["id"]), t["state"], done, t["what"], (t["message"] or "")[:60]]


def cmd_keys_list(client: Client, args, out: Output) -> int:
    keys = client.ssh_keys()
    rows = [
        [str(k["id"]), k["name"], k["fingerprint"], k["last_certified_at"] or "-"] for k in keys
    ]
    text = _table(rows, ["ID", "NAME", "FINGERPRINT", "LAST CERTIFIED"]) if rows else "no keys"
    out.data(keys, text)
    return 0


def cmd_keys_add(client: Client, args, out: Output) -> int:
    path = Path(args.file).expanduser()
    if not path.name.endswith(".pub"):
        raise PortalError(f"{path} is not a .pub file: the portal takes public keys only.")
    try:
        text = path.read_text()[: 16 * 1024 + 1]
    except OSError as exc:
        raise PortalError(f"{path}: {exc.strerror}") from None
    key = client.add_ssh_key(text, args.name or "")
    out.data(key, f"added key {key['id']}: {key['name']} {key['fingerprint']}")
    return 0


def cmd_keys_remove(client: Client, args, out: Output) -> int:
    client.remove_ssh_key(args.id)
    out.data({"removed": args.id}, f"removed key {args.id}")
    return 0


def _identity(option: str | None) -> Path:
    """The private key to use: -i, else the first of ~/.ssh/id_ed25519, id_ecdsa, id_rsa."""
    if option:
        return Path(option).expanduser()
    for name in ("id_ed25519", "id_ecdsa", "id_rsa"):
        path = Path("~/.ssh").expanduser() / name
        if path.exists() and path.with_name(f"{name}.pub").exists():
            return path
    raise PortalError("No SSH key found in ~/.ssh; make one with `ssh-keygen -t ed25519`, or -i.")


def cmd_ssh(client: Client, args, out: Output) -> int:
    identity = _identity(args.identity)
    public = identity.with_name(f"{identity.name}.pub")
    try:
        public_key = public.read_text()[: 16 * 1024 + 1]
    except OSError:
        raise PortalError(f"{public} is missing: the portal certifies the key's .pub.") from None
    folder = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "portal" / "ssh"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    certificate_file = folder / f"job-{args.id}-cert.pub"
    known_hosts = folder / "known_hosts"
    command = list(args.command or [])
    issued = client.ssh_certificate(
        args.id,
        public_key=public_key,
        identity_file=str(identity),
        certificate_file=str(certificate_file),
        known_hosts_file=str(known_hosts),
        **({"command": command} if command else {}),
    )
    _write_private(certificate_file, _one_line(issued["certificate"], "certificate"))
    if issued["known_hosts"]:
        _remember_host(known_hosts, _known_hosts_line(issued["known_hosts"]))
    if args.print_config:
        out.data(issued, issued["ssh_config"].rstrip("\n"))
        return 0
    out.note(f"certificate {issued['key_id']} valid until {issued['valid_before']}")
    argv = ["ssh", *checked_ssh_args(issued["ssh_args"])]
    if args.dry_run:
        out.data({"argv": argv}, " ".join(shlex.quote(a) for a in argv))
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp("ssh", argv)
    return 0  # (not reached)


def _write_private(path: Path, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as fh:
        fh.write(text)


# What `portal ssh` lets the portal's answer put on ssh's command line: the options the
# portal itself uses (jobs/cluster/node_access.ssh_argv), nothing else. A server that
# answered -oProxyCommand=... or LocalCommand would otherwise run a command here.
_SSH_OPTIONS = ("CertificateFile", "IdentitiesOnly", "UserKnownHostsFile", "StrictHostKeyChecking")
_LOGIN = re.compile(r"[a-z_][a-z0-9_.-]{0,31}@[A-Za-z0-9][A-Za-z0-9.-]{0,252}\Z")
_JUMP = re.compile(r"[a-z_][a-z0-9_.-]{0,31}@[A-Za-z0-9][A-Za-z0-9.-]{0,252}(:[0-9]{1,5})?\Z")
_KNOWN_HOST = re.compile(
    r"(\[[A-Za-z0-9.-]+\]:[0-9]{1,5}|[A-Za-z0-9.-]+) [a-z0-9@.-]{3,64} [A-Za-z0-9+/=]{16,16384}\Z"
)


def checked_ssh_args(args: object) -> list[str]:
    """The portal's ssh arguments if every one is of the forms it sends; PortalError
    naming the first that is not."""
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise PortalError("the portal's answer has no ssh argument list")
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        value = args[i + 1] if i + 1 < len(args) else ""
        if arg == "--":  # the rest: the person's own command, one quoted line
            return [*out, *args[i:]]
        if arg in ("-t", "-T") or (_LOGIN.match(arg) and not arg.startswith("-")):
            out.append(arg)
            i += 1
            continue
        ok = (
            (arg == "-i" and value and "\n" not in value)
            or (arg == "-p" and value.isdigit() and 0 < int(value) < 65536)
            or (arg == "-J" and _JUMP.match(value))
            or (
                arg == "-o"
                and value.split("=", 1)[0] in _SSH_OPTIONS
                and "\n" not in value
                and "=" in value
            )
        )
        if not ok:
            raise PortalError(
                f"the portal's answer has an ssh argument this client does not run: {arg!r}"
            )
        out += [arg, value]
        i += 2
    return out


def _known_hosts_line(line: object) -> str:
    text = line.strip() if isinstance(line, str) else ""
    if not _KNOWN_HOST.match(text):
        raise PortalError(
            "the portal's answer has a known_hosts entry that is not one line of a key"
        )
    return text


def _one_line(text: object, what: str) -> str:
    if not isinstance(text, str) or "\n" in text.strip() or not text.strip():
        raise PortalError(f"the portal's answer has a {what} that is not one line")
    return text.strip() + "\n"


def _remember_host(path: Path, line: str) -> None:
    """Add the login node's pinned key to the portal's own known_hosts (never ~/.ssh's)."""
    known = path.read_text().splitlines() if path.exists() else []
    if line.strip() not in known:
        _write_private(path, "".join(f"{k}\n" for k in [*known, line.strip()] if k))


def cmd_remotes(client: Client, args, out: Output) -> int:
    rows = [[r["name"], r["kind"], "site" if r["site"] else "yours"] for r in client.remotes()]
    out.data(rows, _table(rows, ["NAME", "KIND", "WHOSE"]) if rows else "no remotes")
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
    out.data(page, _table(rows, TRANSFER_HEADER) if rows else "no transfers")
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
        _table(lines, header) + f"\n{total:.2f} GPU-hours in all" if rows else "no usage recorded"
    )
    out.data(rows, text)
    return 0


def _cell(value) -> str:
    return " ".join(map(str, value)) if isinstance(value, list) else _fmt(value)


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
            row += [_fmt(v.get("last")), _fmt(v.get("best")), _fmt(v.get("best_step"))]
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
    same = "; ".join(f"{s['field']}={_fmt(s['value'])}" for s in data["same"])
    text = _table(rows, header) if rows else "no runs match"
    if rows and same:
        text += f"\nsame for all {len(rows)}: {same}"
    out.data(data, text)
    return 0


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


def cmd_sweep_list(client: Client, args, out: Output) -> int:
    page = client.experiments()
    rows = [_experiment_line(e) for e in page["results"]]
    out.data(page, _table(rows, EXPERIMENT_HEADER) if rows else "no experiments")
    return 0


def cmd_sweep_show(client: Client, args, out: Output) -> int:
    e = client.experiment(args.id)
    names = list(e["parameters"])
    rows = [
        [
            str(t["number"]),
            t["state"],
            *(_fmt(t["params"].get(n)) for n in names),
            _fmt(t["value"]) + (f" ± {_fmt(t['value_std'])}" if t["value_std"] is not None else ""),
            (t["message"] or "")[:60],
        ]
        for t in e["trials"]
    ]
    text = "\n".join(
        [
            _table([_experiment_line(e)], EXPERIMENT_HEADER),
            e["message"] or "",
            "",
            _table(rows, ["TRIAL", "STATE", *names, e["metric"].upper(), "NOTE"])
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


def cmd_containers(client: Client, args, out: Output) -> int:
    items = client.containers()
    rows = [
        [
            c["slug"],
            f"{c['name']} {c['version']}".strip(),
            ",".join(c["kinds"]),
            "yes" if c["supports_gpu"] else "no",
            "deprecated" if c["deprecated"] else "",
        ]
        for c in items
    ]
    header = ["SLUG", "IMAGE", "KINDS", "GPU", ""]
    out.data(items, _table(rows, header) if rows else "The catalog is empty.")
    return 0


def cmd_apps(client: Client, args, out: Output) -> int:
    items = client.apps()
    rows = [
        [
            a["slug"],
            a["name"],
            a["container"],
            " ".join(f"{f['name']}:{f['type']}" for f in a["form_fields"]) or "-",
        ]
        for a in items
    ]
    header = ["SLUG", "APP", "CONTAINER", "FIELDS (--set NAME=VALUE)"]
    out.data(items, _table(rows, header) if rows else "No app has been added.")
    return 0


def cmd_clusters(client: Client, args, out: Output) -> int:
    items = client.clusters()
    rows = [
        [
            c["name"],
            {"htcondor": "HTCondor", "slurm": "Slurm"}.get(c.get("scheduler", ""), "-"),
            p["name"] + (" (default)" if p["is_default"] else ""),
            ",".join(p["gpu_types"]) or "-",
            p.get("max_nodes", 1),
            f"{p['max_gpus_per_job']} ({p.get('max_gpus_per_node') or p['max_gpus_per_job']}/node)",
            p["max_cpus_per_job"],
            p["max_memory_gb"],
            p["max_time_minutes"],
        ]
        for c in items
        for p in c["partitions"]
    ]
    header = [
        "CLUSTER",
        "SCHEDULER",
        "PARTITION",
        "GPU TYPES",
        "MAX NODES",
        "MAX GPUS",
        "MAX CPUS/NODE",
        "MAX GB/NODE",
        "MAX MIN",
    ]
    out.data(items, _table(rows, header) if rows else "No clusters.")
    return 0


def cmd_login(args, out: Output) -> int:
    config = load_config()
    url = (args.url or config.url or input("Portal address (https://...): ")).strip().rstrip("/")
    if args.token_stdin:
        token = sys.stdin.readline().strip()
    else:
        token = getpass.getpass(f"API token (from {url}/account/): ").strip()
    client = Client(url, token, ca_bundle=config.ca_bundle)
    page = client.jobs(page_size=1)  # proves the address and the token
    values = {"url": url, "token": token, "ca_bundle": config.ca_bundle}
    path = save_config(values)
    out.note(f"Signed in to {url} ({page.get('count', 0)} jobs); saved to {path}.")
    return 0


# --- argument parsing ------------------------------------------------------------------


def _follow_flags(parser: argparse.ArgumentParser, interval: float) -> None:
    """--wait (follow it to its end), looking every ``interval`` seconds."""
    parser.add_argument("--wait", "-w", action="store_true", help="follow it to its end")
    parser.add_argument("--interval", type=float, default=interval, help=argparse.SUPPRESS)


def job_id(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a job id (a number, see `portal jobs`)")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="portal",
        description="Submit, follow and cancel jobs on the HPC portal.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--json", action="store_true", help="print the API's JSON instead")
    parser.add_argument("--timeout", type=float, default=30, help="seconds per request")
    commands = parser.add_subparsers(dest="cmd", metavar="COMMAND", required=True)

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

    jobs = commands.add_parser("jobs", help="your jobs, newest first")
    jobs.add_argument("--state", "-s", help="e.g. running, failed, or active")
    jobs.add_argument("--container", "-c")
    jobs.add_argument("--limit", type=int, default=20)
    jobs.add_argument("--trials", action="store_true", help="also the jobs of experiments' trials")
    jobs.add_argument("--experiment", metavar="ID", help="only this experiment's jobs")
    jobs.set_defaults(run=cmd_jobs)

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

    use = commands.add_parser("usage", help="GPU-hours and CPU-hours per month (accounting)")
    use.add_argument("--from", dest="since", metavar="YYYY-MM", help="first month")
    use.add_argument("--to", dest="until", metavar="YYYY-MM", help="last month (included)")
    use.add_argument("--user", help="staff: one user's")
    use.add_argument("--cluster")
    use.set_defaults(run=cmd_usage)

    show = commands.add_parser("show", help="one job in full")
    show.add_argument("id", type=job_id)
    show.set_defaults(run=cmd_show)

    logs = commands.add_parser("logs", help="a job's output")
    logs.add_argument("id", type=job_id)
    logs.add_argument("--follow", "-f", action="store_true", help="keep printing until it ends")
    logs.add_argument("--stderr", "-e", action="store_true", help="stderr instead of stdout")
    logs.add_argument("--interval", type=float, default=2, help=argparse.SUPPRESS)
    logs.set_defaults(run=cmd_logs)

    cancel = commands.add_parser("cancel", help="cancel a job")
    cancel.add_argument("id", type=job_id)
    cancel.set_defaults(run=cmd_cancel)

    tag = commands.add_parser("tag", help="add or remove a job's tags")
    tag.add_argument("id", type=job_id)
    tag.add_argument("action", choices=["add", "rm"])
    tag.add_argument("tags", nargs="+", metavar="TAG")
    tag.set_defaults(run=cmd_tag)

    note = commands.add_parser("note", help="set a job's note ('' clears it, - reads stdin)")
    note.add_argument("id", type=job_id)
    note.add_argument("text")
    note.set_defaults(run=cmd_note)

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

    commands.add_parser("containers", help="the container catalog").set_defaults(run=cmd_containers)
    commands.add_parser("apps", help="the apps a centre added (submit --app)").set_defaults(
        run=cmd_apps
    )
    commands.add_parser("clusters", help="clusters, partitions and limits").set_defaults(
        run=cmd_clusters
    )

    sweep = commands.add_parser(
        "sweep",
        help="experiments: hyper-parameter sweeps, K-fold",
        description="Experiments: many jobs over a search space, from a spec: name, launch "
        "(a job request, as `portal submit` sends), parameters, method, objective, budget.",
    )
    sweeps = sweep.add_subparsers(dest="sweep_cmd", metavar="ACTION", required=True)
    create = sweeps.add_parser("create", help="start an experiment from a YAML or JSON spec")
    create.add_argument("spec", help="the spec file (YAML or JSON)")
    _follow_flags(create, interval=5)
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

    keys = commands.add_parser(
        "keys",
        help="your SSH public keys, which `portal ssh` has certified",
        description="The public keys the portal may certify for you (for `portal ssh`).",
    )
    key_actions = keys.add_subparsers(dest="keys_cmd", metavar="ACTION", required=True)
    key_actions.add_parser("list", help="your keys").set_defaults(run=cmd_keys_list)
    add = key_actions.add_parser("add", help="add a public key (a .pub file)")
    add.add_argument("file", help="e.g. ~/.ssh/id_ed25519.pub")
    add.add_argument("--name", help="a name for it (default: the key's comment)")
    add.set_defaults(run=cmd_keys_add)
    remove = key_actions.add_parser("remove", help="remove a key")
    remove.add_argument("id", type=job_id)
    remove.set_defaults(run=cmd_keys_remove)

    ssh = commands.add_parser(
        "ssh",
        usage="portal ssh [-i KEY] [--print-config] [--dry-run] ID [-- COMMAND [ARGS...]]",
        help="a shell (or COMMAND) inside your running job, with your own ssh",
        description="Fetch a short-lived certificate for your key and SSH into the job's "
        "allocation on its node through the login node (the key must be added: `portal keys "
        "add`). What follows `--` runs instead of a shell.",
    )
    ssh.add_argument("id", type=job_id)
    ssh.add_argument("-i", "--identity", help="private key (default: ~/.ssh/id_ed25519, ...)")
    ssh.add_argument(
        "--print-config",
        action="store_true",
        help="print an ~/.ssh/config stanza for the job (e.g. for VS Code Remote-SSH) instead",
    )
    ssh.add_argument("--dry-run", action="store_true", help="print the ssh command, run nothing")
    ssh.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    ssh.set_defaults(run=cmd_ssh)

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
    _follow_flags(start, interval=2)
    start.set_defaults(run=cmd_transfer_start)
    transfer_actions.add_parser("list", help="your transfers").set_defaults(run=cmd_transfer_list)
    for name, run, text in (
        ("show", cmd_transfer_show, "a transfer, its progress and timeline"),
        ("cancel", cmd_transfer_cancel, "stop a transfer (rclone stops on the cluster)"),
    ):
        one = transfer_actions.add_parser(name, help=text)
        one.add_argument("id", type=job_id)
        if name == "show":
            _follow_flags(one, interval=2)
        one.set_defaults(run=run)

    login = commands.add_parser("login", help="check and save the portal address and token")
    login.add_argument("url", nargs="?")
    login.add_argument("--token-stdin", action="store_true", help="read the token from stdin")
    login.set_defaults(run=None)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    own = ("-i", "--identity", "--print-config", "--dry-run")
    if args.cmd == "ssh" and args.command and args.command[0].startswith(own):
        parser.error(f"{args.command[0]} goes before the job id (what follows it is the command)")
    # argparse.REMAINDER keeps the `--` itself (Python 3.11); it is not part of the command.
    if getattr(args, "command", None) and args.command[0] == "--":
        args.command = args.command[1:]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Output(args.json)
    try:
        if args.cmd == "login":
            return cmd_login(args, out)
        config = load_config()
        client = Client(config.url, config.token, timeout=args.timeout, ca_bundle=config.ca_bundle)
        return args.run(client, args, out)
    except (PortalError, ConfigError) as exc:
        print(f"portal: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `portal logs 12 | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


__all__ = ["build_parser", "parse_args", "command_text", "config_path", "main", "parse_minutes"]
