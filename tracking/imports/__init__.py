"""Runs brought in from elsewhere: MLflow (a ``mlruns`` folder, an ``mlflow.db``, a
tracking server), W&B offline run directories and TensorBoard event files, each read with
its own project's code (mlflow_runs.py, wandb_runs.py, tensorboard_runs.py) after
tree.py has checked what is on disk. find.py says which runs a folder holds; service.py
stores each as an imported job of the person who brought it in, once."""
