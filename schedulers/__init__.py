"""Scheduler adapters (Slurm, HTCondor) and what runs on the node.

Scheduler adapters and what runs on the nodes, with no models: the seam every adapter
implements (seam.py), the registry that picks one per cluster (registry.py), Slurm
(slurm/) and HTCondor (htcondor/), the job script's body (jobscript.py, launchers.py,
staging.py, envmodules.py) and the scripts run beside a job (on_node/).
"""
