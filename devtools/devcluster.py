"""Register the dev cluster that deploy/devcluster/up.sh started (Slurm, cluster.json) or
the HTCondor pool of deploy/condorpool/up.sh (pool.json) in the portal database."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from clusters.models import Cluster, ClusterAccount, GpuType, Partition
from projects.models import Project


class DevclusterMissing(Exception):
    pass


def read_info(state_dir: Path, name: str = "cluster.json", target: str = "devcluster") -> dict:
    path = Path(state_dir) / name
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise DevclusterMissing(
            f"{path} does not exist: start it with `make {target}` (as root)"
        ) from None


def _public_key(private_key_file: Path) -> str:
    pub = Path(f"{private_key_file}.pub")
    return pub.read_text().strip() if pub.exists() else ""


@transaction.atomic
def register(
    info: dict,
    accounts: dict[str, str] | None = None,
    ssh_auth: str | None = None,
    default: bool = False,
) -> Cluster:
    """Create or update the dev cluster, its partitions and cluster accounts; ``default``
    makes it the default cluster (``make demo`` does, for the Slurm dev cluster).

    ``accounts`` maps portal user names to cluster user names; the cluster's
    default user also becomes its service account. ``ssh_auth`` (a Cluster.SshAuth) sets
    how the portal logs in; None keeps the registered cluster's (a new one: key pairs).
    In certificate mode the accounts get no key: the sshd trusts the portal's CA.
    """
    defaults = {} if ssh_auth is None else {"ssh_auth": Cluster.SshAuth(ssh_auth)}
    cluster, _ = Cluster.objects.update_or_create(
        name=info["name"],
        defaults={
            "description": info.get(
                "description", "Two-node Slurm on this machine (make devcluster)"
            ),
            "scheduler": info.get("scheduler", Cluster.Scheduler.SLURM),
            "ssh_host": info["ssh_host"],
            "ssh_port": info["ssh_port"],
            "host_key": info["host_key"],
            "login_mode": Cluster.LoginMode.PER_USER,
            "default_account": "",
            "home_root": "/home/{user}",
            "scratch_root": info.get("scratch_root", "/scratch/{user}"),
            "enabled": True,
            **defaults,
        },
    )
    # Each GPU type as the admin would describe it (cluster.json from an older up.sh: one).
    described = info.get("gpu_types") or [
        {"name": info.get("gpu_type", "v100"), "compute_capability": "7.0", "memory_gb": 32}
    ]
    for kind in described:
        GpuType.objects.update_or_create(
            cluster=cluster,
            name=kind["name"],
            defaults={
                "model": kind.get("model", ""),
                "compute_capability": Decimal(str(kind["compute_capability"])),
                "memory_gb": int(kind["memory_gb"]),
                "feature": kind.get("feature", ""),
            },
        )
    gpu_type = ",".join(kind["name"] for kind in described)
    nodes = len(info.get("nodes", ())) or 1
    Partition.objects.update_or_create(
        cluster=cluster,
        name="gpu",
        defaults=dict(
            description="Fake GPUs (GRES on tty devices), two per node: "
            + ", ".join(
                f"{k['name']} ({k['compute_capability']}, {k['memory_gb']} GB)" for k in described
            ),
            gpu_types=gpu_type,
            max_gpus_per_job=info.get("max_gpus", 4),
            max_nodes=nodes,
            max_gpus_per_node=info.get("gpus_per_node", 4),
            max_cpus_per_job=info.get("max_cpus", 8),
            max_memory_gb=info.get("max_memory_gb", 16),
            # Four default jobs fit the two nodes (16 CPUs, 31 GB, 2 GPUs each) side by side.
            default_gpus=1,
            default_cpus=2,
            default_memory_gb=4,
            max_time_minutes=24 * 60,
            default_time_minutes=60,
            is_default=True,
        ),
    )
    Partition.objects.update_or_create(
        cluster=cluster,
        name="cpu",
        defaults=dict(
            description="CPU only, short jobs",
            gpu_types="",
            max_gpus_per_job=0,
            max_nodes=nodes,
            max_gpus_per_node=0,
            max_cpus_per_job=info.get("max_cpus", 8),
            max_memory_gb=info.get("max_memory_gb", 16),
            default_cpus=2,
            default_memory_gb=4,
            max_time_minutes=30,
            default_time_minutes=10,
            is_default=False,
        ),
    )

    # Projects as the admin would describe them (their members come from the sync).
    for name, role in info.get("projects", {}).items():
        Project.objects.update_or_create(
            cluster=cluster, name=name, defaults={"default_role": role}
        )

    def save_account(user, cluster_user: str) -> ClusterAccount:
        key_file = Path(info["users"][cluster_user]["private_key_file"])
        account, _ = ClusterAccount.objects.get_or_create(
            cluster=cluster, user=user, defaults={"username": cluster_user}
        )
        account.map_to(cluster_user, ClusterAccount.MappedBy.ADMIN)  # the admin's command
        if not cluster.uses_certificates:
            account.set_private_key(key_file.read_text())
            account.public_key = _public_key(key_file)
        account.save()
        return account

    save_account(None, info["default_user"])
    User = get_user_model()
    for portal_user, cluster_user in (accounts or {}).items():
        if cluster_user not in info["users"]:
            raise ValueError(
                f"the dev cluster has no user {cluster_user!r}; it has {sorted(info['users'])}"
            )
        save_account(User.objects.get(username=portal_user), cluster_user)
    if default:
        cluster.mark_default()
    return cluster
