"""The registry of scheduler adapters: ``Cluster.scheduler`` names one, this finds it.

The seam itself (``Status``, ``Attempt``, ``Submission`` and the ``Adapter`` base class:
what an adapter must do and its capabilities) is schedulers/seam.py. Adapters are named by
dotted path and imported when first asked for (healthchecks' TRANSPORTS), so nothing that
imports this module imports an adapter: Slurm (schedulers/slurm/: commands in operations.py,
parsing in parsers.py, mapping in status.py, scripts in scripts.py) and HTCondor
(schedulers/htcondor/, the same split, its submit description in submit.py); both build on the
scheduler-neutral clusters/ (SSH, work directories) and the job script's body here
(jobscript.py), and never on each other.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from clusters.models import Cluster
    from schedulers.seam import Adapter

SCHEDULERS = {
    "slurm": "schedulers.slurm.scheduler.Slurm",
    "htcondor": "schedulers.htcondor.scheduler.HTCondor",
}


@cache
def adapter(scheduler: str) -> Adapter:
    """The adapter of ``scheduler`` (a ``Cluster.scheduler`` value)."""
    return import_string(SCHEDULERS[scheduler])()


def for_cluster(cluster: Cluster) -> Adapter:
    """The adapter for ``cluster``'s scheduler."""
    return adapter(cluster.scheduler)
