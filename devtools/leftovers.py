"""What a test run left running as the dev cluster's users: their processes on this host
(the dev cluster's nodes are this host) and their Slurm jobs. `make test` ends with it
(deploy/run-tests.sh): a run that leaves a process or a job behind fails, naming it.

    python -m devtools.leftovers [--state /var/lib/portal-devcluster] [--within 60]

Polls once a second for up to ``--within`` seconds (a job cancelled at a test's end, or a
command cut at its deadline, may take a moment to end) and exits 1 naming what is still
there; 0 when nothing is, or when there is no dev cluster. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def cluster_users(state: Path) -> list[str]:
    try:
        info = json.loads((state / "cluster.json").read_text())
    except (OSError, ValueError):
        return []
    return sorted(info.get("users", {}))


def processes(users: list[str]) -> list[str]:
    """``user pid elapsed-seconds command`` of each process of ``users``."""
    out = subprocess.run(
        ["ps", "-eo", "user:32=,pid=,etimes=,args="], capture_output=True, text=True, timeout=30
    ).stdout
    return [
        line.strip()[:200] for line in out.splitlines() if line.split()[:1] in ([u] for u in users)
    ]


def slurm_jobs(users: list[str]) -> list[str]:
    try:
        out = subprocess.run(  # noqa: S603 - user names from the dev cluster's own state
            ["squeue", "-h", "-u", ",".join(users), "-o", "%i %u %j %T"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [f"slurm job {line.strip()}" for line in out.splitlines() if line.strip()]


def left(users: list[str]) -> list[str]:
    return processes(users) + slurm_jobs(users)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.leftovers")
    parser.add_argument("--state", type=Path, default=Path("/var/lib/portal-devcluster"))
    parser.add_argument("--within", type=float, default=60.0)
    args = parser.parse_args(argv)
    users = cluster_users(args.state)
    if not users:
        return 0
    deadline = time.monotonic() + args.within
    while True:
        found = left(users)
        if not found or time.monotonic() >= deadline:
            break
        time.sleep(1)
    if not found:
        print(f"leftovers: nothing of {', '.join(users)} is left running")
        return 0
    print(f"leftovers: the tests left these running as {', '.join(users)}:", file=sys.stderr)
    for line in found:
        print(f"  {line}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
