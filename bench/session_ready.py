"""Time to ready: a VS Code session against a JupyterLab session on the same cluster.

Each round submits one session of each kind to the dev cluster through the portal's own
submit task (real Slurm, the real job script), in alternating order so that drift on the
machine affects both alike, and times two moments from the submission:

- *registered*: the session's connection file exists (the job writes it the moment the
  app's port accepts: for VS Code the session guard's, which listens only once
  code-server answers /healthz; for JupyterLab Jupyter's own port);
- *first page*: the app's start page answers 200 with the session's secret, as the
  portal's proxy sends it (JupyterLab's /lab; VS Code's / and the redirect it answers).

Slurm's scheduling is in both and the same; the ratio says what the app adds. The target
of issue #45: VS Code ready within 1.1x JupyterLab.

    .venv/bin/python bench/session_ready.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("PORTAL_DEMO", "1")

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from django.conf import settings  # noqa: E402

from clusters import files, pool  # noqa: E402
from clusters.models import ClusterAccount  # noqa: E402
from devtools import devcluster  # noqa: E402
from jobs import tasks  # noqa: E402
from jobs.models import Job  # noqa: E402
from tests import factories  # noqa: E402

USER = "bench-session-ready"
START_PAGE = {"notebook": "/lab", "vscode": "/"}


def poll(check, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(interval)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")


def one(kind: str, user, cluster, image, account) -> tuple[float, float]:
    job = factories.job(user, cluster, "", kind=kind, image=image, partition=None)
    start = time.monotonic()
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    if not job.scheduler_job_id:
        raise SystemExit(f"the {kind} session was not submitted: {job.message}")
    try:
        info = poll(
            lambda: pool.with_connection(
                account, lambda conn: files.read_connection_file(conn, job.work_dir)
            ),
            300,
            f"the {kind} session's connection file",
        )
        registered = time.monotonic() - start
        url = f"http://127.0.0.1:{info['port']}{START_PAGE[kind]}"
        headers = {"Authorization": f"token {info['secret']}"}

        def page() -> bool:
            try:
                answer = httpx.get(url, headers=headers, follow_redirects=True, timeout=30)
            except httpx.HTTPError:
                return False
            return answer.status_code == 200

        poll(page, 300, f"the {kind} session's start page")
        return registered, time.monotonic() - start
    finally:
        job.request_cancel()
        tasks.cancel_job.apply(args=[job.pk])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    info = devcluster.read_info(settings.DEVCLUSTER_DIR)
    user = factories.user(USER)
    cluster = devcluster.register(info, {USER: info["default_user"]})
    image = factories.image(
        "bench-session-host", offers_notebook=True, offers_batch=False, offers_vscode=True
    )
    account = ClusterAccount.for_user(cluster, user)
    times: dict[str, list[tuple[float, float]]] = {"notebook": [], "vscode": []}
    try:
        one("notebook", user, cluster, image, account)  # warm both up (file caches)
        one("vscode", user, cluster, image, account)
        for n in range(args.rounds):
            order = ("notebook", "vscode") if n % 2 == 0 else ("vscode", "notebook")
            for kind in order:
                times[kind].append(one(kind, user, cluster, image, account))
    finally:
        Job.objects.filter(owner=user).delete()
        image.delete()
        user.delete()

    def median(kind: str, which: int) -> float:
        return statistics.median(t[which] for t in times[kind])

    print(
        f"dev cluster {info['ssh_host']}:{info['ssh_port']}: submit -> ready, "
        f"{args.rounds} rounds each, interleaved (median seconds)"
    )
    print(f"{'':12} {'registered':>11} {'first page':>11}")
    for kind, name in (("notebook", "JupyterLab"), ("vscode", "VS Code")):
        print(f"{name:12} {median(kind, 0):11.2f} {median(kind, 1):11.2f}")
    print(
        f"{'ratio':12} {median('vscode', 0) / median('notebook', 0):10.2f}x "
        f"{median('vscode', 1) / median('notebook', 1):10.2f}x   (VS Code / JupyterLab; "
        "target <= 1.10x)"
    )


if __name__ == "__main__":
    main()
