"""gunicorn's hooks for the portal (``gunicorn -c python:portal.gunicorn_conf``): a worker
that exits takes its live gauges with it from the metrics (prometheus_client's
multiprocess mode, common/prometheus.py), so a restarted worker is not counted twice."""

import os


def child_exit(server, worker) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
