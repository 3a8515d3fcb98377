"""Right-sizing for the person: what a finished job used of what it asked for, from the
metrics client's own samples of its last run (CPU % of one core per process, resident
memory, each GPU's utilisation and memory from nvidia-smi), in one query; and one line of
advice with the request that would have fit ("Launch again with these resources").

Utilisation is per GPU, averaged over the GPUs (4 GPUs at 99 % is 99 %, not 396 %); the
GPUs a job "used" is the sum of their mean utilisation (4 GPUs at 30 % used 1.2)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from django.db.models import Avg, Max

from clusters.models import GpuType
from metrics.models import MetricPoint

GPU_KEY = re.compile(r"^sys/gpu(\d+)_(util_percent|memory_mib)@")
# Below this share of what was asked, the advice says to ask for less.
WASTE = 0.5
# What the suggestion keeps above the use seen (a run is never exactly like the last).
HEADROOM = 1.25


@dataclass
class Fit:
    asked_gpus: int
    asked_cpus: int
    asked_memory_gb: int
    cores_used: float | None = None  # mean, all processes together
    memory_peak_gb: float | None = None
    gpu_util: list[float] = field(default_factory=list)  # mean % of each GPU
    gpu_memory_peak_gb: list[float] = field(default_factory=list)  # peak of each GPU
    gpu_memory_gb: float | None = None  # what one GPU of its type has
    nodes: int = 1

    @property
    def measured(self) -> bool:
        return self.cores_used is not None or bool(self.gpu_util)

    @property
    def gpu_util_percent(self) -> float | None:
        return sum(self.gpu_util) / len(self.gpu_util) if self.gpu_util else None

    @property
    def gpus_used(self) -> float | None:
        """Per node: the sum of its GPUs' mean utilisation, in GPUs."""
        return sum(self.gpu_util) / 100 / self.nodes if self.gpu_util else None

    @property
    def gpu_memory_percent(self) -> float | None:
        if not self.gpu_memory_peak_gb or not self.gpu_memory_gb:
            return None
        return 100 * max(self.gpu_memory_peak_gb) / self.gpu_memory_gb

    @property
    def cpu_percent(self) -> float | None:
        if self.cores_used is None or not self.asked_cpus:
            return None
        return 100 * self.cores_used / self.asked_cpus

    @property
    def memory_percent(self) -> float | None:
        if self.memory_peak_gb is None or not self.asked_memory_gb:
            return None
        return 100 * self.memory_peak_gb / self.asked_memory_gb

    def suggestion(self) -> dict[str, int]:
        """The request that would have fit (only what is worth changing)."""
        fitted: dict[str, int] = {}
        used = self.gpus_used
        if self.asked_gpus > 1 and used is not None and used < self.asked_gpus * WASTE:
            fitted["gpus"] = max(1, math.ceil(used * HEADROOM))
        if self.cores_used is not None and self.cores_used < self.asked_cpus * WASTE:
            fitted["cpus"] = max(1, math.ceil(self.cores_used * HEADROOM))
        peak = self.memory_peak_gb
        if peak is not None and peak < self.asked_memory_gb * WASTE:
            fitted["memory_gb"] = max(1, math.ceil(peak * HEADROOM))
        return {k: v for k, v in fitted.items() if v < self.asked(k)}

    def asked(self, name: str) -> int:
        return {
            "gpus": self.asked_gpus,
            "cpus": self.asked_cpus,
            "memory_gb": self.asked_memory_gb,
        }[name]

    def advice(self) -> str:
        fitted = self.suggestion()
        if not fitted:
            return "It used what it asked for: nothing to change." if self.measured else ""
        parts = []
        if "gpus" in fitted:
            parts.append(f"asked {self.asked_gpus} GPUs, used at most {self.gpus_used:.1f}")
        if "cpus" in fitted:
            parts.append(f"asked {self.asked_cpus} CPUs, used {self.cores_used:.1f} on average")
        if "memory_gb" in fitted:
            parts.append(
                f"asked {self.asked_memory_gb} GB of memory, used at most "
                f"{self.memory_peak_gb:.1f} GB"
            )
        text = "; ".join(parts)
        return text[0].upper() + text[1:] + ": a smaller request starts sooner."


def fit_of(job) -> Fit:
    """What ``job``'s last run used of what it asked for (nothing measured: no samples)."""
    # Per node, as the form asks for them (a distributed job's use is shared by its nodes).
    nodes = max(1, job.nodes)
    fit = Fit(asked_gpus=job.gpus, asked_cpus=job.cpus, asked_memory_gb=job.memory_gb)
    rows = (
        MetricPoint.objects.filter(
            series__job_id=job.pk, series__system=True, series__attempt=job.attempt
        )
        .values("series__key", "series__rank", "series__node")
        .annotate(mean=Avg("value"), peak=Max("value"))
    )
    cores, memory = [], []
    for row in rows:
        key = row["series__key"]
        if key == "sys/cpu_percent":
            cores.append((row["mean"] or 0) / 100)
        elif key == "sys/memory_gb":
            memory.append(row["peak"] or 0)
        elif match := GPU_KEY.match(key):
            if match[2] == "util_percent":
                fit.gpu_util.append(min(100.0, max(0.0, row["mean"] or 0)))
            else:
                fit.gpu_memory_peak_gb.append((row["peak"] or 0) / 1024)
    fit.cores_used = sum(cores) / nodes if cores else None
    fit.memory_peak_gb = sum(memory) / nodes if memory else None
    fit.nodes = nodes
    if job.gpu_type:
        kind = GpuType.objects.filter(cluster_id=job.cluster_id, name=job.gpu_type).first()
        fit.gpu_memory_gb = float(kind.memory_gb) if kind is not None else None
    return fit
