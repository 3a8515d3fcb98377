"""portal containers, apps, clusters: what a person may launch, and where."""

from __future__ import annotations

from portal_client.api import Client
from portal_client.common import Output


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
    out.rows(items, rows, header, "The catalog is empty.")
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
    out.rows(items, rows, header, "No app has been added.")
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
    out.rows(items, rows, header, "No clusters.")
    return 0


def add_to(commands) -> None:
    commands.add_parser("containers", help="the container catalog").set_defaults(run=cmd_containers)
    commands.add_parser("apps", help="the apps a centre added (submit --app)").set_defaults(
        run=cmd_apps
    )
    commands.add_parser("clusters", help="clusters, partitions and limits").set_defaults(
        run=cmd_clusters
    )
