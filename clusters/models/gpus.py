"""GPUs chosen by what the work needs. An admin describes each GPU type of a cluster once
(compute capability, memory, how Slurm names it); a job may then ask for "any GPU with
compute capability >= X and memory >= Y GB" instead of a model name, and the portal turns
that into the partition's --gres/--constraint (CHTC's gpus_minimum_capability and
gpus_minimum_memory, which Slurm has no words for)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from common import validators

# Well-known GPUs: what discovery fills in for a GRES type of this name (the admin corrects
# it where a site's cards differ, e.g. a 40 GB A100). (compute capability, memory GB, model)
KNOWN_GPUS: dict[str, tuple[str, int, str]] = {
    "k80": ("3.7", 12, "Tesla K80"),
    "p100": ("6.0", 16, "Tesla P100"),
    "v100": ("7.0", 32, "Tesla V100"),
    "t4": ("7.5", 16, "Tesla T4"),
    "rtx6000": ("7.5", 24, "Quadro RTX 6000"),
    "a100": ("8.0", 80, "A100"),
    "a30": ("8.0", 24, "A30"),
    "a40": ("8.6", 48, "A40"),
    "a10": ("8.6", 24, "A10"),
    "l4": ("8.9", 24, "L4"),
    "l40s": ("8.9", 48, "L40S"),
    "h100": ("9.0", 80, "H100"),
    "h200": ("9.0", 141, "H200"),
    "gh200": ("9.0", 96, "GH200"),
    "b200": ("10.0", 180, "B200"),
}


class GpuType(models.Model):
    """One kind of GPU on a cluster, under the name Slurm knows it by."""

    cluster = models.ForeignKey("Cluster", on_delete=models.CASCADE, related_name="gpu_types")
    name = models.CharField(
        max_length=64,
        validators=[validators.slurm_name],
        help_text="The GRES type as in a partition's GPU types (gres.conf Type=, e.g. a100).",
    )
    model = models.CharField(max_length=100, blank=True, help_text="e.g. A100-SXM4-80GB")
    compute_capability = models.DecimalField(
        max_digits=4,
        decimal_places=1,
        validators=[MinValueValidator(Decimal("1.0")), MaxValueValidator(Decimal("99.9"))],
        help_text="CUDA compute capability, e.g. 8.0.",
    )
    memory_gb = models.PositiveIntegerField(
        validators=[MinValueValidator(1)], help_text="Memory of one GPU, in GB."
    )
    feature = models.CharField(
        max_length=64,
        blank=True,
        validators=[validators.slurm_name],
        help_text="The node feature that marks nodes with this GPU (slurm.conf Features=), "
        "if any: several matching types are then asked for as --constraint=a|b.",
    )

    class Meta:
        app_label = "jobs"
        ordering = ["cluster__name", "compute_capability", "memory_gb", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="gpu_type_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.describe()})"

    def describe(self) -> str:
        return f"compute capability {self.compute_capability}, {self.memory_gb} GB"

    def satisfies(self, capability: Decimal | None, memory_gb: int | None) -> bool:
        return (capability is None or self.compute_capability >= capability) and (
            memory_gb is None or self.memory_gb >= memory_gb
        )


@dataclass(frozen=True)
class GpuChoice:
    """What a GPU request becomes on a partition: the matching types (smallest first), the
    GRES type to ask for (or ''), and a --constraint expression (or '')."""

    types: tuple[str, ...]
    gres_type: str = ""
    constraint: str = ""


class NoGpuMatches(ValueError):
    pass


def wants(capability, memory_gb) -> str:
    parts = []
    if capability is not None:
        parts.append(f"compute capability ≥ {capability}")
    if memory_gb is not None:
        parts.append(f"≥ {memory_gb} GB")
    return " and ".join(parts)


def choose(partition, described: list[GpuType], capability, memory_gb) -> GpuChoice:
    """The GPU types of ``partition`` (``described`` by the admin) with at least
    ``capability`` and ``memory_gb``; raises NoGpuMatches naming the closest alternatives
    (on this partition, then the cluster's other partitions)."""
    by_name = {t.name: t for t in described}
    offered = [by_name[n] for n in partition.gpu_type_list if n in by_name]
    matching = sorted(
        (t for t in offered if t.satisfies(capability, memory_gb)),
        key=lambda t: (t.compute_capability, t.memory_gb, t.name),
    )
    if not matching:
        raise NoGpuMatches(_no_match(partition, offered, by_name, capability, memory_gb))
    names = tuple(t.name for t in matching)
    if len(matching) == 1:
        if partition.gpu_type_as_constraint:
            return GpuChoice(names, constraint=names[0])
        return GpuChoice(names, gres_type=names[0])
    if partition.gpu_type_as_constraint:
        return GpuChoice(names, constraint="|".join(names))
    if all(t.feature for t in matching):
        return GpuChoice(names, constraint="|".join(t.feature for t in matching))
    # Slurm cannot OR typed GRES: the smallest card that does the work (the job page
    # names the type asked for beside what was needed).
    return GpuChoice(names, gres_type=names[0])


def _no_match(partition, offered, by_name, capability, memory_gb) -> str:
    asked = wants(capability, memory_gb)
    if not offered:
        undescribed = ", ".join(partition.gpu_type_list) or "none"
        return (
            f"Partition {partition.name} has no described GPU types (its types: "
            f"{undescribed}); an administrator describes them under GPU types."
        )
    closest = sorted(
        offered,
        key=lambda t: (-t.compute_capability, -t.memory_gb),
    )[:3]
    text = f"No GPU on partition {partition.name} has {asked}. Closest: " + "; ".join(
        f"{t.name} ({t.describe()})" for t in closest
    )
    elsewhere = [
        (p.name, t.name)
        for p in partition.cluster.partitions.exclude(pk=partition.pk)
        for t in (by_name.get(n) for n in p.gpu_type_list)
        if t is not None and t.satisfies(capability, memory_gb)
    ]
    if elsewhere:
        text += (
            ". Partition "
            + ", ".join(sorted({p for p, _ in elsewhere}))
            + " has "
            + ", ".join(sorted({t for _, t in elsewhere}))
        )
    return text + "."


@dataclass
class Seen:
    """A GPU type as the nodes report it (sinfo): where it is and the features beside it."""

    name: str
    nodes: set[str]
    partitions: set[str]
    features: set[str]  # features every node with this type has


def seen_types(nodes) -> dict[str, Seen]:
    """GPU types on ``nodes`` (schedulers.slurm.sinfo.NodeFree: gpus by GRES type, features);
    untyped GPUs ("gpu:2") have no name to describe and are left out."""
    found: dict[str, Seen] = {}
    for node in nodes:
        for name, _ in node.gpus:
            if not name:
                continue
            seen = found.setdefault(name, Seen(name, set(), set(), set(node.features)))
            seen.nodes.add(node.name)
            seen.partitions.update(node.partitions)
            seen.features &= set(node.features)
    return found


def record_discovery(cluster, nodes) -> list[str]:
    """Describe the GPU types ``nodes`` report: new types get a well-known card's capability
    and memory (KNOWN_GPUS) or are named as needing a description; a feature named like the
    type on each of its nodes becomes its feature; each partition offers the types its
    nodes have. Returns what was done, line by line, for the admin."""
    report = []
    seen = seen_types(nodes)
    for name, where in sorted(seen.items()):
        feature = next((f for f in sorted(where.features) if f.lower() == name.lower()), "")
        row = GpuType.objects.filter(cluster=cluster, name=name).first()
        if row is not None:
            if feature and not row.feature:
                row.feature = feature
                row.save(update_fields=["feature"])
            report.append(f"{name}: already described ({row.describe()}), on {_nodes(where)}")
            continue
        known = KNOWN_GPUS.get(name.lower())
        if known is None:
            report.append(
                f"{name}: on {_nodes(where)}, unknown card: add its compute capability and "
                "memory by hand"
            )
            continue
        capability, memory, model = known
        GpuType.objects.create(
            cluster=cluster,
            name=name,
            model=model,
            compute_capability=Decimal(capability),
            memory_gb=memory,
            feature=feature,
        )
        report.append(
            f"{name}: added as {model} (compute capability {capability}, {memory} GB; check "
            f"the memory of your cards), on {_nodes(where)}"
        )
    for partition in cluster.partitions.all():
        here = sorted(n for n, where in seen.items() if partition.name in where.partitions)
        merged = list(dict.fromkeys([*partition.gpu_type_list, *here]))
        if here and merged != partition.gpu_type_list:
            partition.gpu_types = ",".join(merged)
            partition.save(update_fields=["gpu_types"])
            report.append(f"partition {partition.name} offers {', '.join(merged)}")
    return report or ["no typed GPUs found on the nodes (sinfo reports none)"]


def _nodes(where: Seen) -> str:
    names = sorted(where.nodes)
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def record_devices(cluster, devices) -> list[str]:
    """Describe the GPUs an HTCondor pool's machines report (schedulers.htcondor.parsers.
    GpuDevice): each model once, named like a well-known card where its name says so
    ("A100-SXM4-40GB" -> a100), with the capability and memory the devices report (the
    smallest memory among cards of one model); partitions with GPUs offer them all."""
    report = []
    by_model: dict[str, list] = {}
    for device in devices:
        by_model.setdefault(device.name, []).append(device)
    names: list[str] = []
    for model, seen in sorted(by_model.items()):
        lowered = model.lower()
        short = next((k for k in sorted(KNOWN_GPUS, key=len, reverse=True) if k in lowered), "")
        name = short or re.sub(r"[^a-z0-9]+", "-", lowered).strip("-")[:64] or "gpu"
        if any(n == name for n in names):  # two models of one family: keep them apart
            name = re.sub(r"[^a-z0-9]+", "-", lowered).strip("-")[:64]
        names.append(name)
        memory_gb = min(d.memory_mb for d in seen) // 1024
        row, created = GpuType.objects.update_or_create(
            cluster=cluster,
            name=name,
            defaults={
                "model": model[:100],
                "compute_capability": Decimal(seen[0].capability),
                "memory_gb": memory_gb,
            },
        )
        machines = sorted({d.machine for d in seen if d.machine})
        report.append(
            f"{name}: {'added' if created else 'updated'} as {model} (compute capability "
            f"{seen[0].capability}, {memory_gb} GB), {len(seen)} on "
            + (", ".join(machines[:5]) or "the pool")
        )
    for partition in cluster.partitions.filter(max_gpus_per_job__gt=0):
        merged = list(dict.fromkeys([*partition.gpu_type_list, *names]))
        if names and merged != partition.gpu_type_list:
            partition.gpu_types = ",".join(merged)
            partition.save(update_fields=["gpu_types"])
            report.append(f"partition {partition.name} offers {', '.join(merged)}")
    return report or ["no GPUs found in the pool (condor_status reports none)"]
