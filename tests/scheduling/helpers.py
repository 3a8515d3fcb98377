"""What the two real schedulers do differently, where more than one test here needs it
(each test's own differences are in a table in the test)."""

from __future__ import annotations

from jobs.models import Job
from tests.devcluster.helpers import remote

# Where jobs run: the dev cluster's two nodes; the pool's one execute machine, as its
# startd reports the claim.
NODES = {"slurm": {"node1", "node2"}, "htcondor": {"vm"}}

# Resources that take every GPU of the cluster, so that a second such job waits: two on
# each of the dev cluster's two nodes; the pool's two (one machine).
EVERY_GPU = {
    "slurm": {"partition": "gpu", "gpus": 2, "nodes": 2},
    "htcondor": {"partition": "gpu", "gpus": 2},
}

# The owner's own hold of a waiting job (over the portal's connection), and the pending
# reason the portal then shows: Slurm's in the portal's words; HTCondor's reason as
# text, markup and all, and who held it.
HOLD = {
    "slurm": (["scontrol", "hold"], "held by you"),
    "htcondor": (
        ["condor_hold", "-reason", "quota <b>exceeded</b>; free space"],
        "held: quota <b>exceeded</b>; free space (by user {user})",
    ),
}


def hold(job: Job) -> str:
    """Hold ``job`` as its owner would; the pending reason the portal should show."""
    argv, reason = HOLD[job.cluster.scheduler]
    account = job.cluster_account
    remote(account, [*argv, job.scheduler_job_id])
    return reason.format(user=account.username)
