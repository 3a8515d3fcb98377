"""A run's checkpoints kept by a policy (best, latest); the rest freed as its owner.

A policy (a person's or a project's) keeps the best k checkpoints of a run by one of its
metrics and the latest m; a plan lists, as a dry run, every checkpoint with what it
costs on disk and why it stays or goes; applying it deletes, as the run's owner on the
cluster, exactly the plan's deletions that are still deletions then. A registered
model version's files are never among them (registry.models.protecting).
"""
