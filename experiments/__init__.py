"""Sweeps, early stopping and K-fold over job arrays (Optuna).

Experiments: hyper-parameter sweeps and K-fold cross-validation over many jobs.

An Experiment owns Trials (one configuration of the search space each); a trial runs
as one job per fold, and the portal's controller (controller.py, a Celery task) submits
trials as Slurm job arrays, scores them from the metrics the jobs log, stops the
unpromising ones early and asks Optuna's samplers (search.py) for the next
configurations. State lives in the portal's database, nowhere else.
"""
