"""Driving jobs on the dev cluster as the portal's periodic tasks would."""

from __future__ import annotations

import os
import secrets
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from django.db.models import QuerySet

from clusters import pool
from jobs import tasks
from jobs.models import Job
from tests import factories, polling

T = TypeVar("T")


def need_part(present: bool, what: str) -> None:
    """A part of `make devcluster` a test needs (PyTorch, say) is ``present``, or the test
    fails where the dev cluster must be whole (PORTAL_REQUIRE_DEVCLUSTER=1, which
    deploy/run-tests.sh sets as root: CI, `make test`) and skips only in other runs."""
    import pytest

    if present:
        return
    if os.environ.get("PORTAL_REQUIRE_DEVCLUSTER") == "1":
        pytest.fail(f"PORTAL_REQUIRE_DEVCLUSTER=1 but {what}")
    pytest.skip(what)


def sync_until(
    job: Job,
    done: Callable[[Job], T],
    timeout: float = 60,
    what: str | Callable[[], str] = "",
    jobs: QuerySet[Job] | None = None,
    interval: float = 0.5,
) -> T:
    """Drive the periodic sync (as beat would) until ``done(job)`` gives something truthy,
    and return that (tests.polling.until: the timeout scales). ``jobs``: what each sync
    reads (default: this job alone); ``what`` names what is waited for."""

    def synced() -> T:
        tasks.sync_jobs(jobs.all() if jobs is not None else Job.objects.filter(pk=job.pk))
        job.refresh_from_db()
        return done(job)

    def described() -> str:
        wanted = what() if callable(what) else what
        return f"job {job.pk} {wanted} (it is {job.state}: {job.message!r})"

    return polling.until(synced, timeout, described, interval=interval)


def run_until(
    job: Job, states: set[str], timeout: float = 60, jobs: QuerySet[Job] | None = None
) -> Job:
    """Drive the periodic sync (as beat would) until the job reaches one of ``states``."""
    wanted = ", ".join(sorted(states))
    return sync_until(
        job, lambda j: j if j.state in states else None, timeout, f"to be {wanted}", jobs
    )


def worker_until(job: Job, states: set[str], queue: str, timeout: float = 60) -> Job:
    """Until the job reaches one of ``states`` with a real worker on ``queue`` doing the
    work; the test plays beat (a sync of every cluster each second)."""

    def reached() -> Job | None:
        job.refresh_from_db()
        if job.state in states:
            return job
        tasks.sync_clusters.apply_async(queue=queue)  # what beat does every interval
        return None

    wanted = ", ".join(sorted(states))
    return polling.until(
        reached,
        timeout,
        lambda: f"job {job.pk} to be {wanted} (it is {job.state}: {job.message!r})",
        interval=1,
    )


def wait_experiment(experiment, timeout: float, watch: Callable[[], object] | None = None):
    """Until the experiment is final (its trials' states in the message if it is not);
    ``watch()`` is called on each look, to record what the scheduler shows meanwhile."""

    def final() -> bool:
        experiment.refresh_from_db()
        if watch is not None:
            watch()
        return experiment.is_final

    def still() -> str:
        states = list(experiment.trials.values_list("number", "state", "message"))
        return f"experiment {experiment.pk} to end (still {experiment.state}: {states})"

    polling.until(final, timeout, still, interval=1)
    return experiment


def run_job(owner, cluster, command: str) -> Job:
    """factories.submitted_job(), synced until it ends; it must end completed."""
    job = run_until(factories.submitted_job(owner, cluster, command), set(Job.FINAL_STATES))
    assert job.state == "completed", job.message
    return job


def connection_info(account, job: Job, timeout: float = 120, interval: float = 1) -> dict:
    """The session's connection file (port, secret) read over SFTP once the job wrote it."""
    from clusters import files

    return polling.until(
        lambda: pool.with_connection(
            account, lambda conn: files.read_connection_file(conn, job.work_dir)
        ),
        timeout,
        lambda: f"job {job.pk}'s connection file (the session to start)",
        interval=interval,
    )


def started_session(account, job: Job, timeout: float = 120) -> dict:
    """connection_info() of ``job``'s session; failing, with the end of its stderr."""
    from clusters import files

    try:
        return connection_info(account, job, timeout=timeout)
    except AssertionError as exc:
        raise AssertionError(files.read_job_log(job, "stderr").text[-3000:]) from exc


def submit_from_threads(job: Job, threads: int = 4) -> list[Exception]:
    """The submit task of ``job`` run by ``threads`` workers at once (a duplicated queue
    message); the errors they raised."""
    import threading

    from django.db import connection

    errors: list[Exception] = []

    def submit():
        try:
            tasks.submit_job.apply(args=[job.pk], throw=True)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    running = [threading.Thread(target=submit) for _ in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join()
    return errors


def remote(account, argv):
    """The stdout of ``argv`` run over SSH as ``account``."""
    return pool.with_connection(account, lambda conn: conn.run(argv)).stdout


def as_user(user: str, *argv: str) -> str:
    """The stdout of ``argv`` run on this machine as ``user`` (the dev cluster's users are
    this machine's); it must succeed."""
    done = subprocess.run(
        ["runuser", "-u", user, "--", *argv], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def squeue_field(scheduler_id: str, field: str) -> str:
    """One squeue field (``%r`` reason, ``%T`` state) of a job, as root sees it."""
    return subprocess.run(
        ["squeue", "-h", "-j", scheduler_id, "-o", field], capture_output=True, text=True
    ).stdout.strip()


def start_now_if_held_for_requeue(scheduler_id: str) -> bool:
    """Slurm holds a requeued job back for the credential lifetime (BeginTime, 120 s);
    a test need not wait: start it now. True if it was held."""
    if squeue_field(scheduler_id, "%r") != "BeginTime":
        return False
    # Not in the second of the requeue: slurmd revokes the killed run's credential with a
    # time in whole seconds and refuses ("Job N already killed, do not launch batch job",
    # exit 1) a launch whose credential is from the same second.
    time.sleep(2)
    subprocess.run(["scontrol", "update", f"JobId={scheduler_id}", "StartTime=now"], check=True)
    return True


# --- clusters in certificate mode ------------------------------------------------------------


def record_issued_keys(monkeypatch) -> list[bytes]:
    """The raw private bytes of every key certs.issue() makes from now on (to look for)."""
    from cryptography.hazmat.primitives import serialization

    from clusters import certs

    made: list[bytes] = []
    original = certs.with_certificate

    def recording(key, certificate):
        made.append(
            key.private_bytes(
                serialization.Encoding.Raw,
                serialization.PrivateFormat.Raw,
                serialization.NoEncryption(),
            )
        )
        return original(key, certificate)

    monkeypatch.setattr(certs, "with_certificate", recording)
    return made


def private_keys_in_key_columns(secrets: list[bytes]) -> list[str]:
    """Every column whose name contains "key", of every table, read back: where a value
    holds a private key (PEM/OpenSSH text, or one of ``secrets`` in hex or base64), before
    or after decrypting it as the portal decrypts stored keys."""
    import base64

    from django.db import connection

    from common import crypto

    needles = ["PRIVATE KEY"]
    for raw in secrets:
        needles += [raw.hex(), base64.b64encode(raw).decode().rstrip("=")]
    found = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            columns = [
                c.name
                for c in connection.introspection.get_table_description(cursor, table)
                if "key" in c.name.lower()
            ]
            for column in columns:
                qn = connection.ops.quote_name
                cursor.execute(f"SELECT {qn(column)} FROM {qn(table)}")  # noqa: S608 (names)
                for (value,) in cursor.fetchall():
                    texts = [str(value)] if value is not None else []
                    try:
                        texts.append(crypto.decrypt(str(value)))
                    except Exception:  # noqa: BLE001 (not a stored key: plain text only)
                        pass
                    if any(n in t for n in needles for t in texts):
                        found.append(f"{table}.{column}")
    return found


class SshdLog:
    """What an sshd wrote to its log since this was made."""

    def __init__(self, path: str):
        self.path = path
        self.start = os.path.getsize(path)

    def text(self) -> str:
        with open(self.path, "rb") as fh:
            fh.seek(self.start)
            return fh.read().decode(errors="replace")


def sshd_accepts(info: dict, user: str, pkey) -> bool:
    """Whether the cluster's real sshd lets ``pkey`` (with its certificate) in as ``user``;
    a refusal is paramiko's AuthenticationException from the server."""
    import paramiko

    transport = paramiko.Transport((info["ssh_host"], info["ssh_port"]))
    try:
        transport.start_client(timeout=10)
        try:
            transport.auth_publickey(user, pkey)
        except paramiko.AuthenticationException:
            return False
        return transport.is_authenticated()
    finally:
        transport.close()


def certificate(ca_file, principal: str, *, valid_after: int, valid_before: int):
    """A paramiko key with a certificate for ``principal`` signed by ``ca_file``, valid
    from ``valid_after`` to ``valid_before`` (Unix times): for certificates the portal
    would never issue."""
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from cryptography.hazmat.primitives.serialization import (
        SSHCertificateBuilder,
        SSHCertificateType,
    )

    from clusters import certs

    key = ed25519.Ed25519PrivateKey.generate()
    cert = (
        SSHCertificateBuilder()
        .public_key(key.public_key())
        .serial(1)
        .type(SSHCertificateType.USER)
        .key_id(b"test-certificate")
        .valid_principals([principal.encode()])
        .valid_after(valid_after)
        .valid_before(valid_before)
        .sign(certs.load_ca(str(ca_file)))
    )
    return certs.with_certificate(key, cert)


TENSORBOARD_PYTHON = "/opt/portal-devcluster/jupyter/bin/python"
WRITE_EVENTS = """
import sys
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter
writer = EventFileWriter(sys.argv[1])
for step in range(20):
    value = Summary.Value(tag="loss", simple_value=1.0 / (step + 1))
    writer.add_event(Event(step=step, summary=Summary(value=[value])))
writer.close()
"""


def tensorboard_runs(cluster, owner) -> tuple[str, str]:
    """A folder in ``owner``'s home on the dev cluster with one run of 20 "loss" scalars
    (run1), written with TensorBoard's own writer: (folder, home)."""
    from clusters.models import ClusterAccount

    folder = f"portal-test-{secrets.token_hex(3)}"
    account = ClusterAccount.for_user(cluster, owner)
    home = cluster.work_dir_root("home", account.username)
    pool.with_connection(
        account,
        lambda conn: conn.run([TENSORBOARD_PYTHON, "-c", WRITE_EVENTS, f"{home}/{folder}/run1"]),
    )
    return folder, home


@contextmanager
def hanging_login(user: str, patterns: list[str], seconds: int) -> Iterator[Path]:
    """``user``'s ~/.bashrc sleeps up to ``seconds`` when the command sshd runs through
    their login shell matches one of ``patterns`` (shell patterns on bash's
    ``$BASH_EXECUTION_STRING``: Debian's bash reads ~/.bashrc for sshd's ``bash -c``, the
    SFTP subsystem's included). Yields the file whose existence ends every sleep within a
    second (in a folder ``user`` can see into); made on the way out, with the ~/.bashrc
    restored as it was, so that no sleeping shell outlives the test."""
    path = Path(f"/home/{user}/.bashrc")
    before = path.read_bytes()
    folder = Path(tempfile.mkdtemp(prefix="portal-hang-"))
    folder.chmod(0o755)
    over = folder / "over"
    trap = (
        f'case "$BASH_EXECUTION_STRING" in {"|".join(patterns)})\n'
        f"  i=0; while [ $i -lt {seconds} ] && [ ! -e {over} ]; do sleep 1; i=$((i + 1)); done ;;\n"
        "esac\n"
    )
    path.write_bytes(trap.encode() + before)
    try:
        yield over
    finally:
        path.write_bytes(before)
        over.touch()  # (the folder stays: a shell ending now still looks for it)
