"""The sync at a centre's population: commands, time and slurmctld RPCs per cycle at 1, 50
and 200 cluster accounts, read once per account (Cluster.sync_reads_all_jobs off: what a
site with PrivateData=jobs gets) or once for everyone through the service account (on).

Runs as root against the dev cluster (`make devcluster-accounts`: loaduser001..200, each
logging in with a certificate signed by the portal's CA) on a database of its own (SQLite
in /tmp, migrated here). Each account gets one held job, submitted as that user. A cycle
is one `tasks.sync_jobs` over every account's jobs, as beat's sync_cluster runs it, on a
warm connection pool (a worker keeps its connections); the cycles of the two ways
alternate so that drift on the machine affects both alike. slurmctld's own counters
(`sdiag`, reset before each cycle) say what the controller did.

    .venv/bin/python bench/sync_accounts.py [--accounts 1,50,200] [--cycles 1]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DB = Path(tempfile.gettempdir()) / "portal-bench-sync.sqlite3"
os.environ["DATABASE_URL"] = f"sqlite:///{DB}"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("PORTAL_DEMO", "1")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from catalog.models import ContainerImage  # noqa: E402
from clusters import pool, ssh  # noqa: E402
from clusters.models import Cluster, ClusterAccount, Partition  # noqa: E402
from devtools import devcluster  # noqa: E402
from jobs import tasks  # noqa: E402
from jobs.models import Job  # noqa: E402

SUBMIT = r"""
xargs -P 4 -L 1 bash -c '
    id=$(runuser -u "$1" -- sbatch --parsable --hold -p cpu -t 5 -J "$2" --wrap true) \
        && echo "$0 ${id%%;*}"'
"""
SDIAG_LINE = re.compile(r"^\s+(\S+)\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:(\d+)\s+total_time:(\d+)")


def sdiag() -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    """slurmctld's RPC counters: ({message type: (count, total µs)}, {user: count})."""
    text = subprocess.run(["sdiag"], capture_output=True, text=True, timeout=30).stdout
    by_type: dict[str, tuple[int, int]] = {}
    by_user: dict[str, int] = {}
    section = None
    for line in text.splitlines():
        if "statistics by message type" in line:
            section = by_type
        elif "statistics by user" in line:
            section = by_user
        elif section is not None and (m := SDIAG_LINE.match(line)):
            if section is by_type:
                by_type[m.group(1)] = (int(m.group(2)), int(m.group(4)))
            else:
                by_user[m.group(1)] = int(m.group(2))
    return by_type, by_user


def setup(count: int) -> list[Job]:
    DB.unlink(missing_ok=True)
    call_command("migrate", verbosity=0)
    info = devcluster.read_info(settings.DEVCLUSTER_DIR)
    get_user_model().objects.create_user("bench")
    cluster = devcluster.register(
        info, {"bench": info["default_user"]}, ssh_auth=Cluster.SshAuth.CERTIFICATE
    )

    def admin_made(account: ClusterAccount, username: str) -> ClusterAccount:
        account.map_to(username, ClusterAccount.MappedBy.ADMIN)  # as `manage.py` makes them
        return account

    users = [f"loaduser{i:03d}" for i in range(1, count + 1)]
    if subprocess.run(["id", users[-1]], capture_output=True).returncode:
        sys.exit(f"no cluster user {users[-1]}: run `make devcluster-accounts`")
    model = get_user_model()
    people = model.objects.bulk_create(model(username=f"p-{u}", password="!") for u in users)
    accounts = ClusterAccount.objects.bulk_create(
        admin_made(ClusterAccount(cluster=cluster, user=p), u)
        for p, u in zip(people, users, strict=True)
    )
    partition = Partition.objects.get(cluster=cluster, name="cpu")
    image = ContainerImage.objects.get_or_create(slug="host", defaults={"name": "Host"})[0]
    jobs = Job.objects.bulk_create(
        Job(
            owner=a.user,
            cluster=cluster,
            partition=partition,
            image=image,
            cluster_account=a,
            command="true",
            cpus=1,
            memory_gb=1,
            time_limit_minutes=5,
            state=Job.State.PENDING,
        )
        for a in accounts
    )
    done = subprocess.run(
        ["bash", "-c", SUBMIT],
        input="".join(
            f"{i} {j.cluster_account.username} {j.scheduler_name}\n" for i, j in enumerate(jobs)
        ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    ids = dict(line.split() for line in done.stdout.splitlines())
    if len(ids) != len(jobs):
        sys.exit(f"submitted {len(ids)} of {len(jobs)} held jobs: {done.stderr[-500:]}")
    for i, job in enumerate(jobs):
        job.scheduler_job_id = ids[str(i)]
    Job.objects.bulk_update(jobs, ["scheduler_job_id"])
    return jobs


def cycle(cluster: Cluster, jobs: list[Job], one_read: bool) -> dict:
    Cluster.objects.filter(pk=cluster.pk).update(sync_reads_all_jobs=one_read)
    subprocess.run(["sdiag", "-r"], capture_output=True, timeout=30)
    commands, connections = ssh.counters["commands"], ssh.counters["connections"]
    start = time.perf_counter()
    tasks.sync_jobs(Job.objects.filter(pk__in=[j.pk for j in jobs]))
    seconds = time.perf_counter() - start
    by_type, by_user = sdiag()
    by_type.pop("REQUEST_STATS_INFO", None)  # sdiag's own
    by_user.pop("root", None)
    return {
        "commands": ssh.counters["commands"] - commands,
        "connections": ssh.counters["connections"] - connections,
        "seconds": seconds,
        "rpcs": sum(count for count, _ in by_type.values()),
        "job_info": by_type.get("REQUEST_JOB_INFO", (0, 0))[0],
        "rpc_ms": sum(total for _, total in by_type.values()) / 1000,
        "users": len(by_user),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accounts", default="1,50,200")
    parser.add_argument("--cycles", type=int, default=1)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (submits as the cluster users, resets sdiag)")
    counts = [int(n) for n in args.accounts.split(",")]
    jobs = setup(max(counts))
    cluster = jobs[0].cluster
    rows = []
    try:
        for count in counts:
            mine = jobs[:count]
            if count <= 50:  # warm both ways' pools first (the pool cannot hold 200 logins)
                for one_read in (False, True):
                    cycle(cluster, mine, one_read)
            results: dict[bool, list[dict]] = {False: [], True: []}
            for _ in range(args.cycles):
                for one_read in (False, True):
                    results[one_read].append(cycle(cluster, mine, one_read))
            for one_read in (False, True):
                runs = results[one_read]
                rows.append(
                    (
                        count,
                        "one read (service account)" if one_read else "per account",
                        max(r["commands"] for r in runs),
                        max(r["connections"] for r in runs),
                        statistics.median(r["seconds"] for r in runs),
                        max(r["rpcs"] for r in runs),
                        max(r["job_info"] for r in runs),
                        statistics.median(r["rpc_ms"] for r in runs),
                        max(r["users"] for r in runs),
                    )
                )
    finally:
        subprocess.run(["scancel", *[j.scheduler_job_id for j in jobs]], capture_output=True)
        pool.close_all()
    print(
        f"sync of N accounts with one held job each, dev cluster (Slurm {slurm_version()}), "
        f"{os.cpu_count()} cores, warm connection pool, median of {args.cycles} cycles"
    )
    print(
        f"{'accounts':>8}  {'how':28} {'commands':>8} {'logins':>6} {'cycle s':>8} {'RPCs':>6} "
        f"{'JOB_INFO':>8} {'ctld ms':>8} {'RPC users':>9}"
    )
    for count, how, commands, logins, seconds, rpcs, job_info, rpc_ms, users in rows:
        print(
            f"{count:8d}  {how:28} {commands:8d} {logins:6d} {seconds:8.2f} {rpcs:6d} {job_info:8d} "
            f"{rpc_ms:8.1f} {users:9d}"
        )
    print(
        "Slurm's RPC rate limit (23.02+, SlurmctldParameters=rl_enable; off by default): a "
        "bucket of 30 per user, refilled 2 a second. Per account, each user spends one RPC "
        "a cycle; one read spends the service account's one RPC a cycle for everyone."
    )


def slurm_version() -> str:
    done = subprocess.run(["sinfo", "-V"], capture_output=True, text=True, timeout=30)
    return done.stdout.split()[-1] if done.stdout else "?"


if __name__ == "__main__":
    main()
