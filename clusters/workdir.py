"""A job's work directory on the cluster, whatever the scheduler: where it is
(``<root>/.portal/jobs/<job id>-<uid>`` under the cluster user's home or scratch, an array's
members one directory each below the array's) and the shell snippets every adapter's
submit step makes it with. Values reach the snippets as positional parameters or on
stdin, never interpolated."""

from __future__ import annotations

from django.core.exceptions import ValidationError


class ScriptError(ValueError):
    """A job cannot be rendered or placed as asked: its submission ends with this message."""


WORK_DIRS = "/.portal/jobs/"


def work_dir_root(cluster, kind: str, cluster_username: str) -> str:
    """The cluster's home or scratch root for that user; a cluster without one (or, with
    per-user accounts, one without {user}) ends the submission with the model's message."""
    try:
        return cluster.work_dir_root(kind, cluster_username)
    except ValidationError as exc:
        raise ScriptError(" ".join(exc.messages)) from None


def job_work_dir(job, cluster_username: str) -> str:
    """``<root>/.portal/jobs/<job id>-<uid>`` under the cluster user's home or scratch."""
    root = work_dir_root(job.cluster, job.work_dir_kind, cluster_username)
    return f"{root.rstrip('/')}{WORK_DIRS}{job.pk}-{job.uid}"


def work_root(work_dir: str) -> str:
    """The home or scratch directory a job's work directory is in: where a notebook
    opens, so that what the user saves is there in the next session too (the portal's
    own files stay in the hidden .portal directory)."""
    root, sep, _ = work_dir.rpartition(WORK_DIRS)
    if not sep or not root:
        raise ScriptError(f"not a portal work directory: {work_dir!r}")
    return root


def work_dir_var() -> str:
    return "$PORTAL_WORK_DIR"


def array_work_dir(array, cluster_username: str, kind: str) -> str:
    """``<root>/.portal/jobs/a<array id>-<uid>``: members work in ``<index>`` below it."""
    root = work_dir_root(array.cluster, kind, cluster_username)
    return f"{root.rstrip('/')}{WORK_DIRS}a{array.pk}-{array.uid}"


# What every submit step starts with, on the login node, with $dir set: the work
# directory (private), entered. Then, for one job, WORK_DIR_SECRETS; for an array,
# MEMBER_DIRS (with $count set). Shared by every adapter's submit step.
ENTER_WORK_DIR = r"""
(umask 077 && mkdir -p -- "$dir")
cd -- "$dir"
"""
# stdin: a line with the notebook's registration secret, a line with the metrics upload
# token (either may be empty). Both go to private files, never onto a command line.
WORK_DIR_SECRETS = r"""
IFS= read -r secret || true
IFS= read -r metrics_token || true
if [ -n "$secret" ]; then (umask 077 && printf '%s\n' "$secret" > .portal_secret); fi
if [ -n "$metrics_token" ]; then
    (umask 077 && printf '%s\n' "$metrics_token" > .portal_metrics_token)
fi
"""
# stdin: one line per member, "<index> <metrics upload token>": each member's directory
# (the scheduler opens its logs there before the script runs) with its private token.
MEMBER_DIRS = r"""
i=0
while [ "$i" -lt "$count" ]; do
    IFS=' ' read -r index token || { echo "portal: member list cut short" >&2; exit 3; }
    case $index in ''|*[!0-9]*) echo "portal: bad member index" >&2; exit 3 ;; esac
    (umask 077 && mkdir -p -- "$index")
    if [ -n "$token" ]; then (umask 077 && printf '%s\n' "$token" > "$index/.portal_metrics_token"); fi
    i=$((i + 1))
done
"""
