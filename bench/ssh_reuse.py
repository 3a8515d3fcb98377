"""Submissions per second and sync time: one reused SSH connection vs a new one per command.

Runs against the dev cluster (`make devcluster`). Jobs are submitted held
(--hold) so they never run, and are cancelled at the end.

    .venv/bin/python bench/ssh_reuse.py [--submissions 30] [--jobs 50] [--syncs 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("PORTAL_DEMO", "1")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from clusters import ssh  # noqa: E402
from devtools import devcluster  # noqa: E402
from schedulers.seam import JobKey  # noqa: E402
from schedulers.slurm import operations  # noqa: E402

SCRIPT = (
    "#!/bin/bash\n#SBATCH --hold\n#SBATCH --output=/dev/null\n#SBATCH --job-name={name}\nsleep 1\n"
)


class NewConnectionPerCommand:
    """The naive baseline: connect, authenticate, run one command, disconnect."""

    def __init__(self, factory):
        self.factory = factory

    def run(self, argv, **kwargs):
        with self.factory() as conn:
            return conn.run(argv, **kwargs)


def timed(fn, repeat: int) -> float:
    start = time.perf_counter()
    for i in range(repeat):
        fn(i)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=50, help="active jobs for the sync measurement")
    parser.add_argument("--syncs", type=int, default=10)
    args = parser.parse_args()

    info = devcluster.read_info(settings.DEVCLUSTER_DIR)
    user = info["default_user"]
    key = Path(info["users"][user]["private_key_file"]).read_text()

    def factory():
        return ssh.Connection(
            info["ssh_host"], info["ssh_port"], user, ssh.load_private_key(key), info["host_key"]
        )

    run_id = uuid.uuid4().hex[:8]
    pooled = factory().open()
    baseline = NewConnectionPerCommand(factory)
    results = {}
    try:
        for label, conn in (
            ("reused connection", pooled),
            ("new connection per command", baseline),
        ):

            def submit(i, conn=conn, label=label):
                work_dir = f"/tmp/portal-bench-{run_id}/{label[:3]}-{i}"
                name = f"portal-bench-{run_id}"
                operations.submit(conn, work_dir, name, SCRIPT.format(name=name))

            seconds = timed(submit, args.submissions)
            results[(label, "submit")] = args.submissions / seconds

        # Enough held jobs for the sync measurement, submitted in one command.
        pooled.run(
            [
                "bash",
                "-c",
                'for i in $(seq "$1"); do sbatch --parsable --hold -J "$2" -o /dev/null '
                "--wrap 'sleep 1'; done",
                "bench",
                str(args.jobs),
                f"portal-bench-{run_id}",
            ]
        )
        listed = pooled.run(
            ["squeue", "-h", "-u", user, f"--name=portal-bench-{run_id}", "-o", "%i"]
        )
        ids = listed.stdout.split()[: args.jobs]
        for label, conn in (
            ("reused connection", pooled),
            ("new connection per command", baseline),
        ):
            seconds = timed(
                lambda i, conn=conn: operations.query(
                    conn, user, {JobKey(sid, f"portal-bench-{run_id}"): "" for sid in ids}
                ),
                args.syncs,
            )
            results[(label, "sync")] = seconds / args.syncs
    finally:
        pooled.run(["scancel", "-u", user, f"--name=portal-bench-{run_id}"], check=False)
        pooled.run(["rm", "-rf", f"/tmp/portal-bench-{run_id}"], check=False)
        pooled.close()

    reuse, fresh = "reused connection", "new connection per command"
    print(
        f"dev cluster {info['ssh_host']}:{info['ssh_port']}, {args.submissions} submissions, "
        f"sync of {len(ids)} active jobs x {args.syncs}"
    )
    print(f"{'':28} {'submissions/s':>14} {'sync time (ms)':>15}")
    for label in (reuse, fresh):
        print(
            f"{label:28} {results[(label, 'submit')]:14.1f} {results[(label, 'sync')] * 1000:15.1f}"
        )
    print(
        f"{'ratio reused/new':28} {results[(reuse, 'submit')] / results[(fresh, 'submit')]:13.1f}x "
        f"{results[(fresh, 'sync')] / results[(reuse, 'sync')]:14.1f}x faster"
    )


if __name__ == "__main__":
    main()
