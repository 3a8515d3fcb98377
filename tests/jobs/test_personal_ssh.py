"""SSH into a job, without a cluster: a person's keys as hostile input, the route and
config rendered as text, the signer's rules for a person's certificate, the API's bounds.
The real path (OpenSSH's client, the dev cluster's sshd and Slurm): tests/devcluster/
test_ssh_into_job.py."""

import subprocess

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from django.core.exceptions import ValidationError
from django.utils import timezone
from rest_framework.test import APIClient

from clusters import signer
from clusters.models import Cluster, PersonalKey
from clusters.models import personal_keys as keys
from identity.audit.models import AuditEvent
from jobs import node_access
from portal_client import cli
from tests import factories

pytestmark = pytest.mark.django_db


def public_line(key=None, comment: str = "me@laptop") -> str:
    key = key or ed25519.Ed25519PrivateKey.generate()
    line = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return f"{line.decode()} {comment}\n"


def test_a_key_is_kept_canonical_with_the_fingerprint_ssh_keygen_prints(tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")])
    text = (tmp_path / "k.pub").read_text()
    printed = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(tmp_path / "k.pub")], capture_output=True, text=True
    ).stdout.split()[1]
    canonical, fingerprint, comment = keys.parse_public_key(f"  {text}  ")
    assert fingerprint == printed
    assert canonical == " ".join(text.split()[:2]) and comment == text.split()[2]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n", "private key"),
        ("ssh-ed25519-cert-v01@openssh.com AAAA x", "certificate"),
        ("ssh-ed25519", "starts with its type"),
        ("ssh-ed25519 AAAA$(id)", "can read"),
        ("U\U0010068a\x1d\xc0 AAAA", "can read"),  # what schemathesis sent: no such type
        ("ssh-foo AAAAB3NzaC1yc2E=", "can read"),
        ("ssh-ed25519 AAAA\nssh-rsa BBBB", "single line"),
        ("x" * (keys.LINE_MAX + 1), "one public key line"),
    ],
)
def test_what_is_no_acceptable_public_key_is_refused_with_a_reason(text, message):
    with pytest.raises(ValidationError, match=message):
        keys.parse_public_key(text)


def test_a_weak_rsa_key_is_refused_and_a_strong_one_kept(owner):
    weak = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(ValidationError, match="2048 bits"):
        PersonalKey.add(owner, public_line(weak))
    strong = rsa.generate_private_key(public_exponent=65537, key_size=3072)
    assert PersonalKey.add(owner, public_line(strong)).public_key.startswith("ssh-rsa ")


def test_a_key_once_per_person_and_a_bounded_number_of_them(owner, outsider):
    line = public_line()
    PersonalKey.add(owner, line)
    with pytest.raises(ValidationError, match="already"):
        PersonalKey.add(owner, line)
    PersonalKey.add(outsider, line)  # the same key may be another person's too
    for _ in range(keys.KEYS_MAX - 1):
        PersonalKey.add(owner, public_line())
    with pytest.raises(ValidationError, match="remove one first"):
        PersonalKey.add(owner, public_line())


def test_a_hostile_comment_becomes_a_plain_name(owner):
    key = PersonalKey.add(owner, public_line(comment="<script>x</script>\u202e;rm -rf ~"))
    assert key.name == "script_x_script_rm -rf"


# --- the route and what is rendered -----------------------------------------------------


def running(owner, cluster, sid="4242", node="node1", **cluster_fields):
    for name, value in cluster_fields.items():
        setattr(cluster, name, value)
    cluster.save()
    account = factories.account(cluster, owner, "alice")
    job = factories.job(owner, cluster, "sleep 1", state="running", scheduler_job_id=sid, node=node)
    job.cluster_account = account
    return job, account


def test_slurm_enters_the_job_with_srun_overlap_through_the_login_node(owner, cluster):
    job, account = running(owner, cluster, user_ssh_host="login.example.org")
    route = node_access.route(job, account)
    config = node_access.ssh_config(route, "~/.ssh/id_ed25519", "/c/my cert.pub", "/k")
    port = f"    Port {cluster.ssh_port}\n" if cluster.ssh_port != 22 else ""
    assert config == (
        f"Host portal-job-{job.pk}\n    HostName login.example.org\n{port}"
        "    User alice\n"
        "    IdentityFile ~/.ssh/id_ed25519\n"
        '    CertificateFile "/c/my cert.pub"\n'
        "    IdentitiesOnly yes\n"
        "    UserKnownHostsFile /k\n"
        "    StrictHostKeyChecking yes\n"
    )
    # The client sends its command; the certificate's force-command runs it in the job.
    argv = node_access.ssh_argv(route, "k", "c", command=["echo", "a b", "$(id)"])
    assert argv[-2:] == ["--", "echo 'a b' '$(id)'"]
    assert route.force_command == (
        'if [ -n "$SSH_ORIGINAL_COMMAND" ]; then exec srun --jobid=4242 --overlap --nodes=1 '
        '--ntasks=1 /bin/sh -c "$SSH_ORIGINAL_COMMAND"; else exec srun --jobid=4242 --overlap '
        '--nodes=1 --ntasks=1 --pty "$SHELL" -l; fi'
    )


def test_an_array_member_is_resolved_to_its_own_job_on_the_login_node(owner, cluster):
    job, account = running(owner, cluster, sid="77_3")
    command = node_access.route(job, account).force_command
    assert "exec srun --jobid=$(squeue -h -j 77_3 -o %A) --overlap" in command


def test_a_proxyjump_cluster_jumps_to_the_jobs_first_node(owner, cluster):
    job, account = running(owner, cluster, node="gpu[07-09],cpu1", node_ssh="proxyjump")
    route = node_access.route(job, account)
    config = node_access.ssh_config(route, "k", "c")
    assert "HostName gpu07\n" in config and "ProxyJump alice@" in config
    assert "RemoteCommand" not in config
    argv = node_access.ssh_argv(route, "k", "c", "/known", command=["echo", "a b"])
    assert argv[-3:] == ["alice@gpu07", "--", "echo 'a b'"]  # one quoted line for sshd
    assert "UserKnownHostsFile=/known" not in argv  # it pins the login node, not gpu07
    assert route.force_command.startswith('[ "$(hostname -s)" = gpu07 ] || ')


def test_htcondor_uses_condor_ssh_to_job(owner, cluster):
    job, account = running(owner, cluster, sid="12.0", scheduler=Cluster.Scheduler.HTCONDOR)
    assert node_access.route(job, account).force_command.endswith(
        "else exec condor_ssh_to_job 12.0; fi"
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"sid": "12; rm -rf ~"}, "can name"),
        ({"node": "n1 -oProxyCommand=x", "node_ssh": "proxyjump"}, "not named the job's node"),
        ({"node": "", "node_ssh": "proxyjump"}, "not named the job's node"),
    ],
)
def test_what_the_scheduler_reports_is_checked_before_it_reaches_a_line(
    owner, cluster, fields, message
):
    job, account = running(owner, cluster, **fields)
    with pytest.raises(node_access.NotReachable, match=message):
        node_access.route(job, account)


def test_the_pinned_host_key_becomes_a_known_hosts_line(owner, cluster):
    job, account = running(owner, cluster)
    route = node_access.route(job, account)
    cluster.host_key = (
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    )
    expected_host = cluster.ssh_host if cluster.ssh_port == 22 else f"[{cluster.ssh_host}]:"
    assert node_access.known_hosts_line(cluster, route).startswith(expected_host)
    cluster.host_key = "SHA256:abc"
    assert node_access.known_hosts_line(cluster, route) == ""


# --- the signer's rules -----------------------------------------------------------------


@pytest.fixture
def certifying(cluster, owner, signing_ca):
    cluster.ssh_auth = "certificate"
    cluster.save()
    account = factories.account(cluster, owner, "alice")
    job = factories.job(
        owner,
        cluster,
        "sleep 1",
        state="running",
        scheduler_job_id="4242",
        node="node1",
        cluster_account=account,
        started_at=timezone.now(),
        time_limit_minutes=10,
    )
    return account, PersonalKey.add(owner, public_line()), job


def test_a_person_gets_a_certificate_for_their_own_key_into_their_own_job(certifying, owner):
    """One job on one cluster: the principal names the cluster, the only command enters
    the job, and it ends with the job's time (10 minutes here, not the 60 it may last)."""
    account, key, job = certifying
    line = signer.certify(account, key, owner.username, "ssh job 1", job=job)
    certificate = serialization.load_ssh_public_identity(line.encode())
    assert certificate.valid_principals == [b"alice@testcluster"]
    assert set(certificate.extensions) == {b"permit-pty", b"permit-port-forwarding"}
    forced = certificate.critical_options[b"force-command"].decode()
    assert forced == node_access.route(job, account).force_command
    assert "srun --jobid=4242 --overlap" in forced
    assert certificate.key_id.decode().startswith(f"portal:{owner.username}:alice@")
    assert 9 * 60 < certificate.valid_before - certificate.valid_after <= 10 * 60 + 30


def test_nobody_else_and_no_other_key_gets_one(certifying, owner, outsider, settings):
    account, key, job = certifying
    with pytest.raises(signer.Refused, match="only for their own account"):
        signer.certify(account, key, outsider.username, "ssh job 1", job=job)
    theirs = PersonalKey.add(outsider, public_line())
    with pytest.raises(signer.Refused, match="not one of the account's person's keys"):
        signer.certify(account, theirs, owner.username, "ssh job 1", job=job)
    other = factories.job(outsider, job.cluster, "x", state="running", scheduler_job_id="7")
    with pytest.raises(signer.Refused, match="not one of the account's person's jobs"):
        signer.certify(account, key, owner.username, "ssh job 1", job=other)
    account.map_to("alice", "")  # typed by the person: never proven
    account.save()
    with pytest.raises(signer.Refused, match="typed, not proven"):
        signer.certify(account, key, owner.username, "ssh job 1", job=job)


def test_a_disabled_account_or_an_ended_job_gets_none(certifying, owner):
    """Before: the signer issued personal certificates for a disabled account (a plain
    login of up to a day)."""
    account, key, job = certifying
    account.disabled_at = timezone.now()
    account.save()
    with pytest.raises(signer.Refused, match="is disabled"):
        signer.certify(account, key, owner.username, "ssh job 1", job=job)
    account.disabled_at = None
    account.save()
    job.state = "completed"
    job.save()
    with pytest.raises(signer.Refused, match="is not running"):
        signer.certify(account, key, owner.username, "ssh job 1", job=job)


def test_the_signers_socket_answers_a_persons_request_by_the_same_rules(certifying, owner):
    account, key, job = certifying
    asked = {"account": account.pk, "personal_key": key.pk, "job": job.pk}
    answer = signer.answer({**asked, "requester": "mallory"})
    assert "only for their own account" in answer["error"]
    answer = signer.answer({**asked, "personal_key": True, "requester": "x"})
    assert answer == {"error": "account, personal_key and job must be ids"}


# --- the API ------------------------------------------------------------------------------


def test_a_person_sees_and_removes_only_their_own_keys(owner, outsider):
    mine = PersonalKey.add(owner, public_line())
    theirs = PersonalKey.add(outsider, public_line())
    api = APIClient()
    api.force_authenticate(owner)
    assert [k["id"] for k in api.get("/api/v1/ssh-keys/").json()] == [mine.pk]
    assert api.delete(f"/api/v1/ssh-keys/{theirs.pk}/").status_code == 404
    assert api.delete(f"/api/v1/ssh-keys/{mine.pk}/").status_code == 204
    assert PersonalKey.objects.filter(pk=theirs.pk).exists()
    refused = api.post("/api/v1/ssh-keys/", {"public_key": "-----BEGIN OPENSSH PRIVATE KEY"})
    assert refused.status_code == 400 and "private key" in str(refused.json())


def test_a_certificate_request_is_bounded(owner, cluster):
    job, _ = running(owner, cluster)
    api = APIClient()
    api.force_authenticate(owner)
    url = f"/api/v1/jobs/{job.pk}/ssh/"
    too_many = {"public_key": public_line(), "command": ["x"] * 65}
    assert api.post(url, too_many, format="json").status_code == 400
    assert api.post(url, {"key": 2**64}, format="json").status_code == 400
    newline = {"public_key": public_line(), "certificate_file": "/tmp/c\nProxyCommand x"}
    assert api.post(url, newline, format="json").status_code == 400
    unknown = api.post(url, {"public_key": public_line()}, format="json")
    assert unknown.status_code == 403 and "portal keys add" in str(unknown.json())


def test_the_cli_keeps_options_before_the_double_dash_and_the_command_after():
    args = cli.parse_args(["ssh", "--print-config", "5"])
    assert args.print_config and args.command == []
    args = cli.parse_args(["ssh", "-i", "k", "5", "--", "python", "-c", "print(1)"])
    assert args.identity == "k" and args.command == ["python", "-c", "print(1)"]
    with pytest.raises(SystemExit):
        cli.parse_args(["ssh", "5", "--print-config"])


# --- the pages ----------------------------------------------------------------------------


def test_the_account_page_adds_and_removes_a_key_and_audits_both(client, owner, outsider):
    client.force_login(owner)
    line = public_line(comment="work laptop")
    page = client.post("/account/ssh-keys/", {"public_key": line}, follow=True)
    key = PersonalKey.objects.get(user=owner)
    assert key.name == "work laptop" and key.fingerprint in page.content.decode()
    bad = client.post("/account/ssh-keys/", {"public_key": "ssh-dss AAAA"}, follow=True)
    assert "can read" in bad.content.decode()
    theirs = PersonalKey.add(outsider, public_line())
    assert client.post(f"/account/ssh-keys/{theirs.pk}/remove/").status_code == 404
    client.post(f"/account/ssh-keys/{key.pk}/remove/")
    assert not PersonalKey.objects.filter(user=owner).exists()
    rows = AuditEvent.objects.filter(user=owner).order_by("id")
    assert [(r.action, r.outcome) for r in rows] == [
        ("ssh_key_add", "ok"),
        ("ssh_key_add", "refused"),
        ("ssh_key_remove", "ok"),
    ]
    assert "AAAA" not in rows[1].message


def test_the_job_pages_ssh_form_takes_only_a_key_id_of_ones_own(client, owner, outsider, cluster):
    job, _ = running(owner, cluster)
    client.force_login(owner)
    for key in ("abc", "", "1e3", str(2**64), "-1"):
        assert client.post(f"/jobs/{job.pk}/ssh/", {"key": key}).status_code == 404
    theirs = PersonalKey.add(outsider, public_line())
    assert client.post(f"/jobs/{job.pk}/ssh/", {"key": theirs.pk}).status_code == 404
    mine = PersonalKey.add(owner, public_line())
    refused = client.post(f"/jobs/{job.pk}/ssh/", {"key": mine.pk}, follow=True)
    assert "does not take certificates" in refused.content.decode()
