"""Every Prometheus metric the portal exports, defined here and nowhere else, and the
small functions the rest of the code calls to record them.

Names and labels follow Prometheus' conventions: base units (``_seconds``), ``_total``
for counters, and labels with bounded values only: a view's route name, an HTTP status,
a cluster's name (an administrator's list), a scheduler command from ``COMMANDS`` (else
``other``), a session kind, a notification channel. Never a person, a job or a path.

With ``PROMETHEUS_MULTIPROC_DIR`` set in a process's environment before it starts (the
systemd units and ``make demo`` set it), every gunicorn worker and Celery process writes
its values there and ``/metrics`` adds them all up (prometheus_client's multiprocess
mode); without it (tests, ``manage.py shell``), each process counts for itself.
"""

from __future__ import annotations

import re
import shlex

from prometheus_client import Counter, Gauge, Histogram

INF = float("inf")
# JupyterHub's spawn-duration buckets (jupyterhub/metrics.py), for a session's time to ready.
SESSION_BUCKETS = (0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 180, 300, 600, INF)
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, INF)
COMMAND_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, INF)
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, INF)

# The scheduler and cluster commands counted by name; any other is "other".
COMMANDS = frozenset(
    {
        "sbatch",
        "squeue",
        "sacct",
        "scancel",
        "scontrol",
        "sinfo",
        "sshare",
        "sacctmgr",
        "sprio",
        "srun",
        "condor_submit",
        "condor_q",
        "condor_history",
        "condor_rm",
        "condor_hold",
        "condor_release",
        "condor_status",
        "condor_qedit",
    }
)

HTTP_REQUEST_SECONDS = Histogram(
    "portal_http_request_duration_seconds",
    "Time to answer an HTTP request, by route name, method and status.",
    ["view", "method", "status"],
    buckets=REQUEST_BUCKETS,
)
SCHEDULER_COMMAND_SECONDS = Histogram(
    "portal_scheduler_command_duration_seconds",
    "Time a command run on a cluster over SSH took, by cluster and command.",
    ["cluster", "command"],
    buckets=COMMAND_BUCKETS,
)
SCHEDULER_COMMAND_FAILURES = Counter(
    "portal_scheduler_command_failures_total",
    "Commands on a cluster that failed: failed (a non-zero status, too much output), "
    "timeout, unreachable.",
    ["cluster", "command", "reason"],
)
SSH_CONNECTS = Counter(
    "portal_ssh_connects_total", "SSH connections opened to a cluster.", ["cluster"]
)
SSH_CONNECT_FAILURES = Counter(
    "portal_ssh_connect_failures_total",
    "SSH connections to a cluster that failed: unreachable, host_key, authentication.",
    ["cluster", "reason"],
)
SSH_POOL_CONNECTIONS = Gauge(
    "portal_ssh_pool_connections",
    "SSH connections held open in the processes' pools.",
    multiprocess_mode="livesum",
)
SYNC_LAST_SUCCESS = Gauge(
    "portal_sync_last_success_timestamp_seconds",
    "When a cluster's jobs were last read from its scheduler (Unix time): "
    "time() minus it is how stale the portal's view of the cluster can be.",
    ["cluster"],
    multiprocess_mode="max",
)
SYNC_PASS_SECONDS = Histogram(
    "portal_sync_pass_duration_seconds",
    "Time to read one cluster's jobs from its scheduler and record the changes.",
    ["cluster"],
    buckets=COMMAND_BUCKETS,
)
SYNC_LAG_SECONDS = Histogram(
    "portal_sync_lag_seconds",
    "For each change of a job's state the sync found: time since the previous read of "
    "that cluster, the longest the change can have waited to be seen.",
    ["cluster"],
    buckets=SESSION_BUCKETS,
)
SYNC_FAILURES = Counter(
    "portal_sync_failures_total",
    "Reads of an account's jobs from a scheduler that failed (its states left as they were).",
    ["cluster"],
)
WEBSOCKET_CONNECTIONS = Gauge(
    "portal_websocket_connections",
    "Websocket connections open now, by what they follow.",
    ["stream"],
    multiprocess_mode="livesum",
)
FANOUT_LAG_SECONDS = Histogram(
    "portal_websocket_fanout_lag_seconds",
    "Time from an event's publication to its sending on a websocket.",
    ["stream"],
    buckets=LAG_BUCKETS,
)
SESSION_READY_SECONDS = Histogram(
    "portal_session_ready_duration_seconds",
    "Time from a session's launch to its registration (ready to open), by kind.",
    ["kind"],
    buckets=SESSION_BUCKETS,
)
SESSION_START_FAILURES = Counter(
    "portal_session_start_failures_total",
    "Sessions that ended before they were ever ready, by kind.",
    ["kind"],
)
METRIC_POINTS_INGESTED = Counter(
    "portal_metric_points_ingested_total", "Training metric points accepted and stored."
)
METRIC_POINTS_REFUSED = Counter(
    "portal_metric_points_refused_total",
    "Training metric points refused: quota (a job's bytes), rate (its calls), invalid.",
    ["reason"],
)
NOTIFICATIONS_SENT = Counter(
    "portal_notifications_sent_total", "Notifications delivered, by channel.", ["channel"]
)
NOTIFICATIONS_FAILED = Counter(
    "portal_notifications_failed_total",
    "Notification deliveries that failed (each try), by channel.",
    ["channel"],
)
ROUTE_REGISTRATIONS = Counter(
    "portal_proxy_route_registrations_total",
    "Session routes written to an HAProxy instance: ok, failed (the instance did not "
    "answer), unresolved (the node's name does not resolve).",
    ["result"],
)


# The portal's own scripts (``bash -c SCRIPT NAME …``: NAME is a constant of the code, its
# $0) by what they run on the scheduler; any other portal-* script under its own name.
SCRIPTS = {"portal-submit": "sbatch", "portal-submit-array": "sbatch"}
_SCRIPT_NAME = re.compile(r"portal-[a-z-]{1,40}")


def command_name(command: str) -> str:
    """The label of a command line run on a cluster: its program's base name where it is
    one of COMMANDS (after any ``NAME=value`` words, and ``env`` with its options: the
    clean environment reads run in, ``env -i PATH=... squeue``), one of the portal's own
    scripts by its name (SCRIPTS), else ``other``."""
    try:
        words = shlex.split(command[:65536])
    except ValueError:
        return "other"
    if (
        len(words) > 3
        and words[0].rsplit("/", 1)[-1] in ("bash", "sh")
        and words[1] == "-c"
        and _SCRIPT_NAME.fullmatch(words[3])
    ):
        return SCRIPTS.get(words[3], words[3])
    after_env = False
    for word in words:
        if "=" in word.split("/")[0] or word == "env" or word.endswith("/env"):
            after_env = after_env or "=" not in word
            continue
        if after_env and word.startswith("-"):  # env's own options (-i: a clean environment)
            continue
        name = word.rsplit("/", 1)[-1]
        return name if name in COMMANDS else "other"
    return "other"


def cluster_label(name: str) -> str:
    """A cluster's name as a label ("" where a connection was made without one)."""
    return name[:64] or "unknown"
