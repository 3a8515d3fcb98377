"""``sinfo --json`` -> what each node has free (CPUs, memory, GPUs by GRES type, node
features): why a job waits for resources, and the GPU types an admin describes. Pure:
tests feed captured output."""

from __future__ import annotations

from dataclasses import dataclass

from schedulers.slurm.json_fields import _json_state, _load, _number, _text

# Node states and flags under which Slurm starts nothing new on a node.
_UNUSABLE = {
    "DOWN",
    "DRAIN",
    "DRAINED",
    "DRAINING",
    "FAIL",
    "FAILING",
    "MAINTENANCE",
    "POWERED_DOWN",
    "POWER_DOWN",
    "NOT_RESPONDING",
    "RESERVED",
    "FUTURE",
    "UNKNOWN",
}


@dataclass(frozen=True)
class NodeFree:
    """What one node could still give a job."""

    name: str
    partitions: tuple[str, ...]
    usable: bool
    cpus: int
    memory_mb: int
    gpus: tuple[tuple[str, int], ...]  # (type or '', free count)
    features: tuple[str, ...] = ()

    def free_gpus(self, gpu_type: str = "") -> int:
        if not gpu_type:
            return sum(n for _, n in self.gpus)
        if gpu_type in self.features:
            return sum(n for _, n in self.gpus)
        return sum(n for t, n in self.gpus if t == gpu_type)


def _gres_counts(value: str) -> dict[str, int]:
    """'gpu:v100:4(S:0-1),gpu:a100:2' -> {'v100': 4, 'a100': 2}; 'gpu:2' -> {'': 2}."""
    counts: dict[str, int] = {}
    for item in value.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        kind, count = (parts[1], parts[2]) if len(parts) >= 3 else ("", parts[1])
        if count.isdigit():
            counts[kind] = counts.get(kind, 0) + int(count)
    return counts


def parse_sinfo_json(output: str) -> list[NodeFree]:
    """``sinfo --json`` -> what each node has free (CPUs, memory, GPUs by type). Read by
    key, like the job lists; a node entry that is not what it should be is skipped."""
    entries = _load(output, "sinfo", "nodes")
    nodes = []
    for entry in entries[:10000]:
        if not isinstance(entry, dict):
            continue
        cpus, alloc = _number(entry.get("cpus")), _number(entry.get("alloc_cpus")) or 0
        memory, used = _number(entry.get("real_memory")), _number(entry.get("alloc_memory")) or 0
        if cpus is None or memory is None:
            continue
        flags = f if isinstance(f := entry.get("state_flags"), list) else []
        states = {_json_state(entry.get("state")).upper(), *(_text(f).upper() for f in flags)}
        total, in_use = (
            _gres_counts(_text(entry.get("gres"))),
            _gres_counts(_text(entry.get("gres_used"))),
        )
        partitions = p if isinstance(p := entry.get("partitions"), list) else []
        nodes.append(
            NodeFree(
                name=_text(entry.get("name")),
                partitions=tuple(_text(p) for p in partitions),
                usable=not (states & _UNUSABLE),
                cpus=max(cpus - alloc, 0),
                memory_mb=max(memory - used, 0),
                gpus=tuple((t, max(n - in_use.get(t, 0), 0)) for t, n in sorted(total.items())),
                features=tuple(f for f in _text(entry.get("active_features")).split(",") if f),
            )
        )
    return nodes
