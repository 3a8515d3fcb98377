"""How a person reaches their running job's allocation with their own SSH client: the
route (login node, user, the command that enters the allocation) and the ~/.ssh/config
stanza or ssh command line for it. Pure: it reads only the job and account in hand.

Entering through the login node keeps whatever runs there (a shell, VS Code Remote-SSH's
server) inside the job: Slurm's ``srun --jobid=<id> --overlap`` starts it as a step of
the job on its node and it ends with the job; HTCondor's ``condor_ssh_to_job``. Where
compute nodes run sshd with pam_slurm_adopt (Cluster.node_ssh "proxyjump"), the client
jumps through the login node to the job's first node instead, and sshd adopts the login
into the job. Nothing a person typed reaches these lines: the job id and node come from
the scheduler and are checked against their formats first.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from dataclasses import dataclass
from typing import Any

from clusters import certs, signer
from clusters.models import Cluster, ClusterAccount, PersonalKey
from common import context
from common.hostlist import expand_hostlist
from jobs.models import Job

SLURM_ID = re.compile(r"\d{1,12}(_\d{1,9})?\Z")
HTCONDOR_ID = re.compile(r"\d{1,12}\.\d{1,9}\Z")
NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}\Z")
USER = re.compile(r"[a-z_][a-z0-9_.-]{0,31}\Z")


class NotReachable(Exception):
    """Why the job cannot be entered now (a message for the person)."""


@dataclass(frozen=True)
class Route:
    alias: str  # the Host name in ~/.ssh/config: portal-job-<id>
    host: str  # the login node, as people reach it
    port: int
    user: str  # the cluster user, the certificate's only principal
    enter: str = ""  # run on the login node to enter the job; "" with a ProxyJump
    interactive: str = ""  # what ``enter`` runs for a shell
    node: str = ""  # the job's node, for a ProxyJump

    @property
    def login(self) -> str:
        return (
            f"{self.user}@{self.host}:{self.port}"
            if self.port != 22
            else f"{self.user}@{self.host}"
        )

    @property
    def force_command(self) -> str:
        """The certificate's ``force-command``: what sshd runs whatever the client asks,
        the client's own command (``$SSH_ORIGINAL_COMMAND``) inside the job, a login shell
        in it without one. On the login node it enters the allocation (it fails once the
        job has ended); with a ProxyJump it runs only on the job's node (the login node
        only forwards the connection, which runs no command)."""
        if self.node:
            short = self.node.split(".", 1)[0]
            return (
                f'[ "$(hostname -s)" = {shlex.quote(short)} ] || '
                '{ echo "this certificate is for the job\'s node only" >&2; exit 1; }; '
                'exec /bin/sh -c "${SSH_ORIGINAL_COMMAND:-exec "$SHELL" -l}"'
            )
        interactive = f" {self.interactive}" if self.interactive else ""
        return (
            'if [ -n "$SSH_ORIGINAL_COMMAND" ]; then '
            f'exec {self.enter} /bin/sh -c "$SSH_ORIGINAL_COMMAND"; '
            f"else exec {self.enter}{interactive}; fi"
        )


def route(job: Job, account: ClusterAccount) -> Route:
    """The way into ``job`` (running) as ``account``'s cluster user."""
    if job.state != Job.State.RUNNING or not job.scheduler_job_id:
        raise NotReachable(f"Job {job.pk} is not running: there is no allocation to enter.")
    cluster = job.cluster
    if not USER.match(account.username):
        raise NotReachable(f"The cluster user {account.username!r} cannot be named safely.")
    host = cluster.user_ssh_host or cluster.ssh_host
    common: dict[str, Any] = {
        "alias": f"portal-job-{job.pk}",
        "host": host,
        "port": cluster.ssh_port,
    }
    sid = job.scheduler_job_id
    if cluster.scheduler == Cluster.Scheduler.HTCONDOR:
        if not HTCONDOR_ID.match(sid):
            raise NotReachable(f"HTCondor's id {sid!r} is not one the portal can name.")
        return Route(user=account.username, enter=f"condor_ssh_to_job {sid}", **common)
    if not SLURM_ID.match(sid):
        raise NotReachable(f"Slurm's id {sid!r} is not one the portal can name.")
    if cluster.node_ssh == Cluster.NodeSsh.PROXYJUMP:
        node = first_node(job.node)
        return Route(user=account.username, node=node, **common)
    # An array member's id (12_3) is resolved to its own job id on the login node.
    target = sid if "_" not in sid else f"$(squeue -h -j {sid} -o %A)"
    return Route(
        user=account.username,
        enter=f"srun --jobid={target} --overlap --nodes=1 --ntasks=1",
        interactive='--pty "$SHELL" -l',
        **common,
    )


def first_node(nodes: str) -> str:
    """The first node of a job's node list ("gpu[01-04],cpu7" -> "gpu01")."""
    expanded = expand_hostlist(nodes or "")
    head = expanded[0] if expanded else ""
    if not NODE.match(head):
        raise NotReachable("The scheduler has not named the job's node yet; try again in a moment.")
    return head


def ssh_config(
    route: Route, identity_file: str, certificate_file: str, known_hosts: str = ""
) -> str:
    """The ~/.ssh/config stanza for ``route``: ``ssh <alias>`` opens a shell in the job;
    VS Code Remote-SSH connects to the same Host (with remote.SSH.enableRemoteCommand on
    where there is a RemoteCommand)."""
    lines = [f"Host {route.alias}"]
    if route.node:
        lines += [f"    HostName {route.node}", f"    ProxyJump {route.login}"]
    else:
        lines += [f"    HostName {route.host}"]
        if route.port != 22:
            lines.append(f"    Port {route.port}")
    lines += [
        f"    User {route.user}",
        f"    IdentityFile {_path(identity_file)}",
        f"    CertificateFile {_path(certificate_file)}",
        "    IdentitiesOnly yes",
    ]
    if known_hosts and not route.node:  # (it pins the login node's key, not the nodes')
        lines += [f"    UserKnownHostsFile {_path(known_hosts)}", "    StrictHostKeyChecking yes"]
    # No RemoteCommand: the certificate's force-command enters the job (a shell there when
    # the client asks for none, as VS Code Remote-SSH's own commands otherwise).
    return "\n".join(lines) + "\n"


def ssh_argv(
    route: Route,
    identity_file: str,
    certificate_file: str,
    known_hosts: str = "",
    command: list[str] | None = None,
) -> list[str]:
    """The ssh command line for ``route`` (what `portal ssh JOB` runs); ``command``: run it
    in the job instead of a shell."""
    argv = ["ssh", "-i", identity_file, "-o", f"CertificateFile={certificate_file}"]
    argv += ["-o", "IdentitiesOnly=yes"]
    if route.node:  # (the login node's pinned key is not the node's: the person's own)
        argv += ["-J", route.login, f"{route.user}@{route.node}"]
        return argv + (["--", shlex.join(command)] if command else [])
    if known_hosts:
        argv += ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes"]
    argv += ["-p", str(route.port), f"{route.user}@{route.host}"]
    if command:  # (run in the job by the certificate's force-command)
        return [*argv, "-T", "--", shlex.join(command)]
    return [*argv, "-t"]


def known_hosts_line(cluster: Cluster, route: Route) -> str:
    """The pinned host key as a known_hosts line for the login node ("" when the portal
    pins only a fingerprint, which a known_hosts file cannot hold)."""
    key = cluster.host_key.strip()
    if key.startswith("SHA256:") or len(key.split()) < 2:
        return ""
    name = route.host if route.port == 22 else f"[{route.host}]:{route.port}"
    return f"{name} {' '.join(key.split()[:2])}\n"


def _path(path: str) -> str:
    return f'"{path}"' if any(c.isspace() for c in path) else path


def answer_personal(request: dict) -> dict:
    """A certificate for a person's own registered key into their own running job, on
    their own enabled account only: the requester must be the account's (active) person,
    the key theirs and the job theirs, running as that account; the principal names the
    stored cluster user on this cluster, the certificate's only command enters that job
    (Route.force_command), and it ends when the job's time is up."""
    account_id, key_id = request.get("account"), request.get("personal_key")
    job_id = request.get("job")
    purpose, requester = request.get("purpose", ""), request.get("requester", "")
    if not (signer.is_id(account_id) and signer.is_id(key_id) and signer.is_id(job_id)):
        return {"error": "account, personal_key and job must be ids"}
    if not all(isinstance(v, str) for v in (purpose, requester)) or not requester:
        return {"error": "purpose and requester must be text"}
    account = ClusterAccount.objects.select_related("cluster", "user").filter(pk=account_id).first()
    if account is None or account.user is None:
        return {"error": f"no cluster account {account_id} of a person"}
    if account.user.get_username() != requester:
        return {"error": "a person's certificate is only for their own account"}
    if account.disabled_at is not None or not account.user.is_active:
        return {"error": f"the account {account.username} on {account.cluster.name} is disabled"}
    key = PersonalKey.objects.filter(pk=key_id, user=account.user).first()
    if key is None:
        return {"error": "that key is not one of the account's person's keys"}
    job = (
        Job.objects.select_related("cluster")
        .filter(pk=job_id, owner_id=account.user_id, cluster_account=account)
        .first()
    )
    if job is None:
        return {"error": f"job {job_id} is not one of the account's person's jobs on it"}
    left = job.remaining
    if left is None or left.total_seconds() < 1:
        return {"error": f"job {job_id} is not running: there is no allocation to enter"}
    try:
        entry = route(job, account)
    except NotReachable as exc:
        return {"error": str(exc)}
    return signer.signed(
        account,
        requester,
        lambda: certs.sign_personal(
            key.load(),
            account.username,  # the stored cluster user, never a name from the request
            requester[: signer.TEXT_MAX],
            f"{purpose[: signer.TEXT_MAX]} key {key.fingerprint}",
            cluster=account.cluster.name,
            force_command=entry.force_command,
            valid_before=dt.datetime.now(dt.UTC) + left,
            request_id=context.well_formed(request.get("request_id")),
        ),
    )
