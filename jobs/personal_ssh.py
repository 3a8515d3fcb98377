"""SSH into a running job from a person's own client: their registered keys
(clusters.models.PersonalKey) and, for one key and one job, a certificate from the portal's
CA with the route into the allocation (jobs/node_access.py). The certificate is a
way into that job only: its principal names the cluster, its ``force-command`` enters the
job whatever the client asks, and it ends when the job's time is up.

Who may: the job's owner alone (access.may_enter), on their own cluster account in
certificate mode; the signer applies its own rules again (clusters/signer.py). Every
key added or removed and every certificate issued or refused is an audit row; the
certificate's key id names the person, their cluster user, the job and the key's
fingerprint, and sshd logs it with the login.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from clusters import acting, signer
from clusters.models import PersonalKey
from identity import audit
from identity.audit.models import AuditEvent
from jobs import node_access
from jobs.models import Job
from projects import access

Action = AuditEvent.Action


class Refused(PermissionDenied):
    """No certificate for this job and key now; the message says why (an audit refusal)."""


@dataclass(frozen=True)
class Issued:
    certificate: str  # the OpenSSH certificate line, for <key>-cert.pub
    key_id: str
    valid_before: dt.datetime
    route: node_access.Route
    known_hosts: str  # the login node's pinned key as a known_hosts line ("" if none)


def add_key(user, text: str, name: str = "") -> PersonalKey:
    with audit.action(Action.SSH_KEY_ADD, user=user) as entry:
        key = PersonalKey.add(user, text, name)  # (refused: its reason, never the text)
        entry.note(f"{key.name} {key.fingerprint}")
    return key


def remove_key(user, key: PersonalKey) -> None:
    if key.user_id != user.pk:
        raise PermissionDenied("Only its owner removes a key.")
    with audit.action(Action.SSH_KEY_REMOVE, user=user, target=f"{key.name} {key.fingerprint}"):
        key.delete()


def find_key(user, *, key_id: int | None = None, public_key: str = "") -> PersonalKey:
    """``user``'s key by its id or its public line; Refused with what to do otherwise."""
    key = None
    if key_id is not None:
        key = PersonalKey.objects.filter(pk=key_id, user=user).first()
    elif public_key:
        try:
            key = PersonalKey.of(user, public_key)
        except ValidationError as exc:
            raise Refused(" ".join(exc.messages)) from None
    if key is None:
        raise Refused(
            "That key is not one of yours: add its .pub on your Account page, or with "
            "`portal keys add ~/.ssh/id_ed25519.pub`."
        )
    return key


def certify(user, job: Job, key: PersonalKey) -> Issued:
    """A certificate for ``key`` to enter ``job``, issued to ``user``: Refused with the
    reason when they may not, the job is not running, or the cluster does not sign."""
    if not access.may_enter(user, job.owner_id) or key.user_id != user.pk:
        raise PermissionDenied("Only the job's owner can SSH into it, with one of their keys.")
    account = job.cluster_account
    cluster = job.cluster
    with audit.action(
        Action.SSH_CERTIFICATE,
        user=user,
        account=account,
        cluster=cluster,
        target=f"job {job.pk} key {key.fingerprint}",
    ) as entry:
        if not cluster.uses_certificates:
            raise Refused(
                f"{cluster.name} does not take certificates from the portal; log in with your "
                "own key as the cluster documents."
            )
        if job.state != Job.State.RUNNING:
            raise Refused(f"Job {job.pk} is not running: there is no allocation to enter.")
        if account is None or account.user_id != user.pk:
            raise Refused(f"Job {job.pk} does not run as your own cluster account.")
        if account.disabled_at is not None or not user.is_active:
            raise Refused(
                f"Your account {account.username} on {cluster.name} is disabled: no certificate."
            )
        try:
            route = node_access.route(job, account)
        except node_access.NotReachable as exc:
            raise Refused(str(exc)) from None
        try:
            line = signer.certify(account, key, user.get_username(), f"ssh job {job.pk}", job=job)
        except (signer.Refused, signer.Unreachable) as exc:
            raise Refused(f"No certificate: {exc}") from None
        certificate = serialization.load_ssh_public_identity(line.encode())
        assert isinstance(certificate, serialization.SSHCertificate)
        key_id = certificate.key_id.decode()
        acting.key_id.set(key_id)
        entry.note(f"valid {certificate.valid_before - certificate.valid_after} s")
    PersonalKey.objects.filter(pk=key.pk).update(last_certified_at=timezone.now())
    return Issued(
        certificate=line,
        key_id=key_id,
        valid_before=dt.datetime.fromtimestamp(certificate.valid_before, dt.UTC),
        route=route,
        known_hosts=node_access.known_hosts_line(cluster, route),
    )
