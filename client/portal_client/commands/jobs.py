"""portal jobs, show, logs, cancel, tag, note: one person's jobs."""

from __future__ import annotations

import argparse
import sys
import time

from portal_client import common
from portal_client.api import Client
from portal_client.common import Output, job_id


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
            common.state(j),
            j["container"],
            f"{j['cluster']}/{j['partition']}",
            _layout(j),
            f"{j['gpus']}x{j['gpu_type']}" if j["gpus"] and j["gpu_type"] else j["gpus"],
            j["node"] or "-",
            common.when(j["created_at"]),
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
    text = common.table(rows, header) if rows else "No jobs."
    if page.get("count", 0) > len(jobs):
        text += f"\n({len(jobs)} of {page['count']}; --limit shows more)"
    out.data(jobs, text)
    return 0


def _layout(job: dict) -> str:
    """'2x2' (nodes × tasks per node); older portals send neither: '1x1'."""
    return f"{job.get('nodes', 1)}x{job.get('tasks_per_node', 1)}"


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


def cmd_show(client: Client, args, out: Output) -> int:
    job = client.job(args.id)
    fields = [
        ("Job", job["id"]),
        ("Name", job["name"] or "-"),
        ("State", common.state(job)),
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
        ("Created", common.when(job["created_at"])),
        ("Started", common.when(job["started_at"])),
        ("Ended", common.when(job["ended_at"])),
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
    if common.says(job, "is_final"):
        out.data(job, f"job {job['id']}: already ended ({common.state(job)})")
    else:
        out.data(job, f"job {job['id']}: cancelling ({common.state(job)})")
    return 0


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


def add_to(commands) -> None:
    jobs = commands.add_parser("jobs", help="your jobs, newest first")
    jobs.add_argument("--state", "-s", help="e.g. running, failed, or active")
    jobs.add_argument("--container", "-c")
    jobs.add_argument("--limit", type=int, default=20)
    jobs.add_argument("--trials", action="store_true", help="also the jobs of experiments' trials")
    jobs.add_argument("--experiment", metavar="ID", help="only this experiment's jobs")
    jobs.set_defaults(run=cmd_jobs)
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
