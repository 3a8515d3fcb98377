"""Files in a job's work directory are data, never pointers (real sshd, SFTP and Slurm).

A job can turn any file the portal reads into a FIFO (an open() that never returns), a
symbolic link (to /dev/zero, to a file the job could not show otherwise) or a sparse file
of any size that costs it nothing.
"""

import time
import tracemalloc

import pytest

from clusters import files, pool, ssh
from metrics.models import MetricPoint
from tests.devcluster.helpers import remote, run_job
from tracking.tail import tail_job

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


def timed(call):
    start = time.monotonic()
    try:
        return call(), time.monotonic() - start
    except Exception as exc:  # noqa: BLE001 - the test looks at what it was
        return exc, time.monotonic() - start


def test_a_fifo_or_a_link_in_place_of_a_log_is_refused_at_once(devcluster, owner):
    """Before: SFTP opened the FIFO and the read never returned (a web thread per log
    request, with its database connection); the link was followed."""
    job = run_job(
        owner,
        devcluster,
        "exec >/dev/null 2>&1; rm -f stdout.log stderr.log; mkfifo stdout.log; "
        "ln -s /etc/passwd stderr.log",
    )
    for stream, kind in (("stdout", "a FIFO"), ("stderr", "a symbolic link")):
        outcome, seconds = timed(lambda s=stream: files.read_job_log(job, s))
        assert isinstance(outcome, files.NotARegularFile), outcome
        assert f"{stream}.log is {kind}" in str(outcome) and seconds < 5


def test_an_sftp_open_that_blocks_times_out(devcluster, owner):
    """The lstat check can lose a race with a job that swaps a file for a FIFO; then the
    timeout on the SFTP channel is what frees the worker."""
    job = run_job(owner, devcluster, "mkfifo trap")
    conn = ssh.connect_account(job.cluster_account)
    conn.command_timeout = 2
    try:

        def open_fifo():
            with conn.sftp_session() as sftp:
                sftp.open(f"{job.work_dir}/trap", "rb")

        outcome, seconds = timed(open_fifo)
        assert isinstance(outcome, ssh.ClusterUnreachable) and 1.5 < seconds < 10, outcome
        assert not conn.is_open  # the stuck session is dropped, not reused
    finally:
        conn.close()
        # A writer's open releases the SFTP server still blocked opening the FIFO (Debian's
        # sftp-server is a process of the person's and would wait there for ever).
        remote(
            job.cluster_account,
            ["sh", "-c", 'exec 3<>"$1"; rm -f -- "$1"', "sh", f"{job.work_dir}/trap"],
        )


def test_hostile_metrics_files_are_skipped_and_sparse_ones_cannot_fill_a_worker(
    devcluster, owner, settings
):
    """Sixteen sparse 64 MiB files, a FIFO and a link to /dev/zero beside one honest file.
    Before: one pass loaded every file's read (16 x the per-file bound) into the worker,
    and the FIFO blocked it for ever."""
    settings.PORTAL_METRICS_TAIL_BYTES = 1024 * 1024
    job = run_job(
        owner,
        devcluster,
        "mkdir -p metrics && cd metrics && "
        "for i in $(seq 10 25); do truncate -s 64M rank-$i.jsonl; done; "
        "mkfifo rank-1.jsonl; ln -s /dev/zero rank-2.jsonl; "
        'for s in 0 1 2; do echo "{\\"seq\\": $s, \\"time\\": 1, \\"metrics\\": {\\"loss\\": $s}}"; '
        "done > rank-0.jsonl",
    )
    tracemalloc.start()
    try:
        start = time.monotonic()
        tail_job(job, max_passes=3)
        seconds = time.monotonic() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert MetricPoint.objects.filter(series__job=job).count() == 3
    # A pass holds its budget a few times over (bytes, text, lines): measured 4.0 MiB for a
    # 1 MiB budget. The old code held every file's read at once, 16 MiB before any copy.
    assert peak < 8 * settings.PORTAL_METRICS_TAIL_BYTES, f"peak {peak / 2**20:.1f} MiB"
    assert seconds < 30


def test_a_hostile_connection_file_never_becomes_a_route(devcluster, owner):
    """connection.json is written by the job: its secret goes to HAProxy's runtime API
    (commands are split at ';' and newlines) and its port to a route. Only a URL-safe
    secret and a user port pass; a FIFO or a link in its place is refused at once."""
    from clusters.models import ClusterAccount

    job = run_job(owner, devcluster, "true")
    account = ClusterAccount.for_user(devcluster, owner)
    path = f"{job.work_dir}/connection.json"

    def read_with(content: str | None, make: list[str] | None = None):
        def go(conn):
            conn.run(["rm", "-f", "--", path])
            if make is not None:
                conn.run([*make, path])
            else:
                conn.run(["sh", "-c", 'printf %s "$1" > "$2"', "sh", content, path])
            return files.read_connection_file(conn, job.work_dir)

        return timed(lambda: pool.with_connection(account, go))

    good = "A" * 32
    assert read_with(f'{{"port": 8888, "secret": "{good}"}}')[0] == {"port": 8888, "secret": good}
    # The run that wrote it (Slurm's restart count), so a requeued run's stale file is known.
    run = read_with(f'{{"port": 8888, "secret": "{good}", "attempt": 2}}')[0]
    assert run == {"port": 8888, "secret": good, "attempt": 2}
    for content in (
        '{"port": 8888, "secret": "aaaaaaaaaaaaaaaa; del server be_sessions/x"}',
        '{"port": 8888, "secret": "aaaaaaaaaaaaaaaa\\nshow info"}',
        '{"port": 8888, "secret": "short"}',
        f'{{"port": 80, "secret": "{good}"}}',
        f'{{"port": "8888; x", "secret": "{good}"}}',
        f'{{"port": 8888, "secret": "{good}", "attempt": "1"}}',
        f'{{"port": 8888, "secret": "{good}", "attempt": true}}',
        f'{{"port": 8888, "secret": "{good}", "attempt": -1}}',
        "not json",
        " " * 100_000 + f'{{"port": 8888, "secret": "{good}"',  # cut: never whole JSON
    ):
        outcome, seconds = read_with(content)
        assert outcome is None and seconds < 5, (content[:60], outcome)
    for make, kind in ((["mkfifo"], "a FIFO"), (["ln", "-s", "/etc/passwd"], "a symbolic link")):
        outcome, seconds = read_with(None, make)
        assert isinstance(outcome, files.NotARegularFile), outcome
        assert kind in str(outcome) and seconds < 5
