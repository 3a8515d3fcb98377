"""The reconciler: what the schedulers say of the portal's jobs, recorded on them.

``sync_jobs`` asks each cluster once (through its reader, ``ClusterAccount.reader_for``)
or once per cluster account about its jobs (their ``Job.ref()``: the adapters read no
row), and applies each job's own record (matched by id and name,
``JobKey``) through ``Job.apply_scheduler_status``; what a change owes is in its JobEvent
(jobs/outbox.py), so nothing here queues a task. ``record_attempts`` reads accounting's
runs. Called by thin tasks (jobs/tasks.py: the periodic sync, one job's sync, after a
cancel or release); never by a web request."""

from __future__ import annotations

import logging
import time
from collections import defaultdict

from django.conf import settings
from django.core.cache import cache

from clusters import files, pool, ssh
from clusters.models import ClusterAccount
from common import prometheus as metrics
from jobs import sessions
from jobs.models import Job, JobAttempt
from schedulers import registry as schedulers
from schedulers.seam import Attempt, JobKey, JobRef, Status

log = logging.getLogger(__name__)


def sync_jobs(jobs) -> int:
    """Ask the scheduler about ``jobs`` and record changes: O(1) commands per cluster
    whose service account reads every job (``Cluster.sync_reads_all_jobs``), otherwise
    O(1) per cluster account.

    An error talking to the scheduler leaves every state as it was: unknown is not
    ended. One account's trouble (an error, odd output) never stops another's sync.
    Returns the number of jobs that changed.
    """
    groups = by_account(jobs)
    read = read_all(groups)
    changed = 0
    for group in groups:
        try:
            changed += _sync_account(group, read.get(group[0].cluster_account_id or 0))
        except Exception:  # noqa: BLE001 - isolate accounts from each other
            log.exception("sync of %s failed; other accounts go on", group[0].cluster_account)
    return changed


def by_account(jobs) -> list[list[Job]]:
    """The submitted ones among ``jobs``, one group per cluster account (each group is one
    connection and O(1) scheduler commands)."""
    groups: dict[int, list[Job]] = defaultdict(list)
    for job in jobs.exclude(scheduler_job_id="").select_related(
        # What the sync reads of the job, and its Job.ref().
        "cluster_account__cluster",
        "owner",
        "array",
        "cluster",
        "partition",
    ):
        if job.cluster_account_id:
            groups[job.cluster_account_id].append(job)
    return list(groups.values())


def read_all(groups: list[list[Job]]) -> dict[int, dict[JobKey, Status]]:
    """{cluster account id: statuses of its group} for the groups on clusters whose reader
    (ClusterAccount.reader_for) answered one read of every owner's jobs. Groups it could not
    read (no reader, a scheduler that cannot, an error) are left to their own accounts."""
    return _through_reader(groups, "statuses_of_owners")


def _through_reader(groups: list[list[Job]], method: str) -> dict[int, dict]:
    """``method`` of each cluster's adapter (statuses_of_owners, attempts_of_owners) on its
    reader's connection, once for all the groups on that cluster: {account id: its part}."""
    by_cluster: dict[int, list[tuple[ClusterAccount, list[Job]]]] = defaultdict(list)
    for group in groups:
        if (account := group[0].cluster_account) is not None:
            by_cluster[account.cluster_id].append((account, group))
    read: dict[int, dict] = {}
    for accounts in by_cluster.values():
        cluster = accounts[0][0].cluster
        scheduler = schedulers.for_cluster(cluster)
        reader = ClusterAccount.reader_for(cluster) if scheduler.reads_all_jobs else None
        if reader is None:
            continue
        owners: dict[str, list[JobRef]] = defaultdict(list)
        for account, group in accounts:
            owners[account.username].extend(job.ref() for job in group)
        operation = getattr(scheduler, method)
        try:
            found = pool.with_connection(reader, lambda conn, o=owners, op=operation: op(conn, o))
        except ssh.ClusterError as exc:
            log.warning("%s through %s failed; each account asks itself: %s", method, reader, exc)
            continue
        for account, group in accounts:
            keys = {job.scheduler_key for job in group}
            mine = found.get(account.username, {})
            read[account.pk] = {k: value for k, value in mine.items() if k in keys}
    return read


def _sync_account(group: list[Job], statuses: dict[JobKey, Status] | None = None) -> int:
    """Record what the scheduler says of one account's jobs: ``statuses`` as read for the
    whole cluster, the jobs it lacks (or all, without it) asked on the account's own
    connection. Each job takes the status under its own key (id and name), never one
    of another job that holds its id now."""
    account = group[0].cluster_account
    if account is None:  # grouped by cluster_account_id: never
        return 0
    scheduler = schedulers.for_cluster(account.cluster)
    label = metrics.cluster_label(account.cluster.name)
    started = time.monotonic()
    statuses = dict(statuses or {})
    vouched = set(statuses)  # read by the service account; the rest by the owner's login
    unread = [job.ref() for job in group if job.scheduler_key not in statuses]
    if unread:
        try:
            statuses.update(
                pool.with_connection(
                    account, lambda conn: scheduler.statuses(conn, account.username, unread)
                )
            )
        except ssh.ClusterError as exc:
            log.warning("sync of %s skipped, states unchanged: %s", account, exc)
            metrics.SYNC_FAILURES.labels(label).inc()
            return 0
    since = _read_now(account.pk, label)
    changed = 0
    for job in group:
        status = statuses.get(job.scheduler_key)
        if status is None:
            # Neither the controller nor accounting knows it under this name (its id may
            # be another job's now): after a grace period that is its final word.
            changed += job.mark_unseen(settings.PORTAL_LOST_JOB_GRACE)
            continue
        if status.unreadable:  # e.g. a state this portal does not know: left as it was
            log.error("job %s: %s", job.pk, status.unreadable)
            continue
        before = (job.state, job.node, job.attempt)
        try:
            moved = job.apply_scheduler_status(status, vouched=job.scheduler_key in vouched)
        except ValueError as exc:  # one job's odd report never stops the others
            log.error("job %s: %s", job.pk, exc)
            continue
        if status.note:
            job.note(status.note)
        changed += moved
        if moved and since is not None:
            metrics.SYNC_LAG_SECONDS.labels(label).observe(since)
        if moved and job.has_session and job.ended_badly and sessions.links().waiting([job]):
            metrics.SESSION_START_FAILURES.labels(job.kind).inc()  # never ready, now ended
        if job.has_session and job.restarted_since(*before):
            sessions.links().restart_for(job)
    # What each change owes (the final metrics tail, the stderr tail, accounting's runs,
    # notifications) is in its JobEvent: jobs.outbox delivers it, whatever the broker does.
    running = [job for job in group if job.state == Job.State.RUNNING]
    discover_sessions(account, running)
    metrics.SYNC_PASS_SECONDS.labels(label).observe(time.monotonic() - started)
    return changed


def _read_now(account_id: int, label: str) -> float | None:
    """An account's jobs were read now: the seconds since the read before (any process's;
    the longest a change found now can have waited), None for the first. For the
    metrics: the lag, and the time of the cluster's last read."""
    now = time.time()
    metrics.SYNC_LAST_SUCCESS.labels(label).set(now)
    key = f"sync-read:{account_id}"
    try:
        before = cache.get(key)
        cache.set(key, now, timeout=24 * 3600)
    except Exception:  # noqa: BLE001 - Redis down: the sync goes on, only the lag is unknown
        return None
    return now - before if isinstance(before, float) and before <= now else None


class TryAgain(Exception):
    """Accounting could not answer now (busy, unreachable) or has not recorded a job's end
    yet: the caller reads these jobs again a little later."""


def record_attempts(job_ids: list[int], *, last_try: bool = False) -> None:
    """Each run of these jobs (attempts of requeued ones) with the GPUs and CPUs it held and
    for how long, from accounting: one command per cluster through its reader
    (Cluster.sync_reads_all_jobs), otherwise one per cluster account. Raises TryAgain
    (unless ``last_try``: then what could be read is kept and the rest is logged)."""
    groups = by_account(Job.objects.filter(pk__in=job_ids[:1000]))
    read = _through_reader(groups, "attempts_of_owners")
    for group in groups:
        runs = read.get(group[0].cluster_account_id or 0)
        try:
            # An ended job the reader found no run of is asked through its owner (accounting
            # may hide other users' jobs from the reader even where squeue does not; Slurm
            # 22.05's JSON names a job "allocation" for a moment after it ends).
            if runs is None or any(j.is_final and j.scheduler_key not in runs for j in group):
                runs = _attempts_of(group)
        except ssh.ClusterError as exc:
            if exc.transient and not last_try:
                raise TryAgain(str(exc)) from None
            log.warning("attempts of %s not read: %s", [j.pk for j in group], exc)
            if runs is None:
                continue
            # What the reader found is kept; the jobs it missed are read again below.
        unsettled = False
        for job in group:
            if runs.get(job.scheduler_key):
                JobAttempt.record(job, runs[job.scheduler_key])
            unsettled |= job.is_final and not JobAttempt.settled(job)
        if unsettled and not last_try:
            # Accounting has not recorded the end yet: read these jobs again a little later.
            raise TryAgain("accounting has not recorded every end yet")


def _attempts_of(group: list[Job]) -> dict[JobKey, list[Attempt]]:
    account = group[0].cluster_account
    if account is None:  # grouped by cluster_account_id: never
        return {}
    scheduler = schedulers.for_cluster(account.cluster)
    refs = [job.ref() for job in group]
    return pool.with_connection(
        account, lambda conn: scheduler.attempts(conn, account.username, refs)
    )


def discover_sessions(account, running_jobs) -> None:
    """Notebooks that have not called back: read their connection file over SFTP. Only
    where the service account vouches for the node: a node read through the owner's login
    is their environment's word (a ``squeue`` function can name any host), believed only
    from the registration call's own address (proxy/views.py)."""
    notebooks = [j for j in running_jobs if j.has_session]
    if not notebooks:
        return  # every sync passes here: no query when there is nothing to find
    waiting = sessions.links().waiting(notebooks)
    vouch_nodes([j for j in waiting if not j.node_vouched])
    for job in (j for j in waiting if j.node_vouched):
        try:
            info = pool.with_connection(
                account, lambda conn, j=job: files.read_connection_file(conn, j.work_dir)
            )
        except ssh.ClusterError as exc:
            log.info("connection file of job %s not readable yet: %s", job.pk, exc)
            continue
        if info is not None and info.get("attempt", job.attempt) != job.attempt:
            # An earlier run's file, still there while the requeued run starts up: its
            # port is dead, or someone else's by now.
            log.info(
                "job %s: connection file of run %s, not %s", job.pk, info["attempt"], job.attempt
            )
            continue
        if info is not None and job.node:
            # The host is where the scheduler runs the job, never what the file says.
            sessions.links().found(job, job.node, info["port"], info["secret"])


def vouch_nodes(jobs: list[Job]) -> None:
    """Ask the cluster's service account (a login of the centre's, not the owners') where
    ``jobs`` run, and mark ``node_vouched`` those it places on the node their owner's login
    reported: one read of every owner's jobs where the scheduler has one
    (``reads_all_jobs``), else one read per owner, through the service account. Nothing
    without a service account."""
    if not jobs:
        return
    cluster = jobs[0].cluster  # (one account's jobs: one cluster)
    scheduler = schedulers.for_cluster(cluster)
    service = ClusterAccount.objects.filter(cluster=cluster, user__isnull=True).first()
    if service is None:
        return
    owners: dict[str, list[JobRef]] = defaultdict(list)
    for job in jobs:
        if job.cluster_account is not None:
            owners[job.cluster_account.username].append(job.ref())

    def read(conn) -> dict[str, dict[JobKey, Status]]:
        if scheduler.reads_all_jobs:
            return scheduler.statuses_of_owners(conn, owners)
        return {owner: scheduler.statuses(conn, owner, refs) for owner, refs in owners.items()}

    try:
        found = pool.with_connection(service, read)
    except ssh.ClusterError as exc:
        log.info("nodes of %s not vouched for now: %s", [j.pk for j in jobs], exc)
        return
    for job in jobs:
        owner = job.cluster_account.username if job.cluster_account else ""
        status = found.get(owner, {}).get(job.scheduler_key)
        if status is None or not job.node or status.node[:4000] != job.node:
            if status is not None and status.node and status.node != job.node:
                log.warning(
                    "job %s: its owner's login says node %r, the service account %r",
                    job.pk,
                    job.node[:200],
                    status.node[:200],
                )
            continue
        if Job.objects.filter(pk=job.pk, node=job.node).update(node_vouched=True):
            job.node_vouched = True
