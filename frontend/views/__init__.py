"""Page views: short; logic lives on the models and in clusters.

``jobs.py``: the dashboard, the launch form and a job's page with its actions;
``files.py``: its log tail and work directory, read over SSH; ``account.py``: cluster
accounts and API tokens; ``common.py``: what they share (the job a request may see)."""
