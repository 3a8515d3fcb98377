"""Models registered where their files sit: versions, aliases, manifests.

A version points at files where a run left them on the cluster (a job's work directory),
with a sha256 manifest read there as the person; nothing is copied, and while the version
exists the file manager leaves its files alone. MLflow's own client registers, sets
aliases and loads ``models:/name@alias`` on the tracking URI a job is given
(mlflow_api.py; the rules in service.py).
"""
