"""SSH into a running job from a person's own OpenSSH client, with a certificate the portal
signs for their registered key (#45): the dev cluster's real sshd checks it, and Slurm's
``srun --overlap`` puts the shell in the job's allocation on its node."""

import datetime as dt
import html
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from django.test import Client
from rest_framework.test import APIClient

from clusters import certs
from clusters.models import PersonalKey
from devtools import devcluster as devcluster_mod
from identity.audit.models import AuditEvent
from jobs import tasks
from tests import factories
from tests.devcluster.helpers import SshdLog, run_until

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def cert_devcluster(devcluster, devcluster_info, trusted_ca):
    trusted_ca(devcluster_info)
    return devcluster_mod.register(
        devcluster_info, {"owner": devcluster_info["default_user"]}, "certificate"
    )


def keypair(folder: Path, name: str = "id") -> Path:
    path = folder / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def ssh(args: list[str], stdin: str = "", timeout: float = 60) -> subprocess.CompletedProcess:
    base = ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
    return subprocess.run(base + args, input=stdin, capture_output=True, text=True, timeout=timeout)


def test_a_person_sshs_into_their_running_job_with_a_certificate_for_their_key(
    cert_devcluster, devcluster_info, owner, outsider, tmp_path
):
    key = keypair(tmp_path)
    api = APIClient()
    api.force_authenticate(owner)
    added = api.post("/api/v1/ssh-keys/", {"public_key": Path(f"{key}.pub").read_text()})
    assert added.status_code == 201, added.content
    job = factories.job(owner, cert_devcluster, "sleep 300")
    tasks.submit_job.apply(args=[job.pk])
    job = run_until(job, {"running"}, timeout=120)
    log = SshdLog(devcluster_info["sshd_log"])

    # `portal ssh JOB -- command`: the certificate, the login node's pinned key, the args.
    asked = {
        "public_key": Path(f"{key}.pub").read_text(),
        "identity_file": str(key),
        "certificate_file": str(tmp_path / "id-cert.pub"),
        "known_hosts_file": str(tmp_path / "known_hosts"),
    }
    command = ["bash", "-c", 'echo "job=$SLURM_JOB_ID node=$SLURMD_NODENAME"; echo "$(id -un)"']
    answer = api.post(f"/api/v1/jobs/{job.pk}/ssh/", {**asked, "command": command}, format="json")
    assert answer.status_code == 201, answer.content
    issued = answer.json()
    (tmp_path / "id-cert.pub").write_text(issued["certificate"] + "\n")
    (tmp_path / "known_hosts").write_text(issued["known_hosts"])
    run = ssh(issued["ssh_args"])
    assert run.returncode == 0, run.stderr
    assert f"job={job.scheduler_job_id} node={job.node}" in run.stdout
    assert devcluster_info["default_user"] in run.stdout
    # sshd's log names the person's certificate: their portal user, the job, the key.
    assert f"ID {issued['key_id']}" in log.text()
    assert issued["key_id"].startswith(f"portal:{owner.username}:")
    row = AuditEvent.objects.get(action="ssh_certificate", outcome="ok")
    assert row.key_id == issued["key_id"] and row.user == owner
    certificate = serialization.load_ssh_public_identity(issued["certificate"].encode())
    assert certificate.valid_principals == [
        f"{devcluster_info['default_user']}@devcluster".encode()
    ]
    # No longer than the job's time (5 minutes), not PORTAL_SSH_USER_CERT_MINUTES (60).
    assert certificate.valid_before - certificate.valid_after <= 5 * 60 + 30

    # The ~/.ssh/config stanza: `ssh portal-job-N` opens a login shell in the job.
    config = tmp_path / "config"
    config.write_text(
        api.post(f"/api/v1/jobs/{job.pk}/ssh/", asked, format="json").json()["ssh_config"]
    )
    shell = subprocess.run(
        ["ssh", "-F", str(config), "-tt", "-o", "BatchMode=yes", f"portal-job-{job.pk}"],
        input='echo "inside=$SLURM_JOB_ID"; exit\n',
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert f"inside={job.scheduler_job_id}" in shell.stdout, shell.stdout + shell.stderr

    # The job page: the card, then a certificate and the stanza for the person's key.
    browser = Client()
    browser.force_login(owner)
    assert "SSH into this job" in browser.get(f"/jobs/{job.pk}/").content.decode()
    personal = PersonalKey.objects.get(user=owner)
    page = browser.post(f"/jobs/{job.pk}/ssh/", {"key": personal.pk}).content.decode()
    shown = re.search(r"data-ssh-certificate[^>]*>([^<]+)<", page).group(1)
    assert serialization.load_ssh_public_identity(shown.encode()).valid_principals == [
        f"{devcluster_info['default_user']}@devcluster".encode()
    ]
    assert f"Host portal-job-{job.pk}" in html.unescape(page)

    # Expired: the same key with a certificate whose time is up is refused by sshd.
    old = certs.sign_personal(
        personal.load(),
        devcluster_info["default_user"],
        owner.username,
        "expired",
        cluster=cert_devcluster.name,
        force_command="true",
        now=dt.datetime.now(dt.UTC) - dt.timedelta(hours=2),
    )
    (tmp_path / "id-cert.pub").write_text(old.public_bytes().decode() + "\n")
    assert ssh(issued["ssh_args"]).returncode == 255
    # Another cluster user with a valid certificate for this one: refused.
    (tmp_path / "id-cert.pub").write_text(issued["certificate"] + "\n")
    other = [
        a.replace(f"{devcluster_info['default_user']}@", "hpcuser2@") for a in issued["ssh_args"]
    ]
    assert other != issued["ssh_args"]
    refused = ssh(other)
    assert refused.returncode == 255 and "Permission denied" in refused.stderr

    # Nobody else gets a certificate for it: not another person, not staff.
    api.force_authenticate(outsider)
    assert api.post(f"/api/v1/jobs/{job.pk}/ssh/", asked, format="json").status_code == 404
    browser.force_login(outsider)
    assert browser.post(f"/jobs/{job.pk}/ssh/", {"key": personal.pk}).status_code == 404
    api.force_authenticate(factories.user("staffer", superuser=True))
    denied = api.post(f"/api/v1/jobs/{job.pk}/ssh/", asked, format="json")
    assert denied.status_code == 403, denied.content


def test_a_job_that_is_not_running_gets_no_certificate(cert_devcluster, owner, tmp_path):
    key = keypair(tmp_path)
    api = APIClient()
    api.force_authenticate(owner)
    api.post("/api/v1/ssh-keys/", {"public_key": Path(f"{key}.pub").read_text()})
    job = factories.job(owner, cert_devcluster, "true", state="completed", scheduler_job_id="9")
    answer = api.post(
        f"/api/v1/jobs/{job.pk}/ssh/", {"public_key": Path(f"{key}.pub").read_text()}, format="json"
    )
    assert answer.status_code == 403
    assert "is not running" in answer.json()["error"]["message"]
    assert AuditEvent.objects.get(action="ssh_certificate").outcome == "refused"


@pytest.mark.django_db(transaction=True)
def test_portal_ssh_runs_a_command_inside_the_job(
    cert_devcluster, devcluster_info, owner, live_server, tmp_path
):
    """The CLI end to end: `portal keys add`, then `portal ssh JOB -- COMMAND` fetches a
    certificate into its cache and execs the person's own ssh (HOME is the test's)."""
    from identity.tokens import ApiToken

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    keypair(home / ".ssh", "id_ed25519")
    _, token = ApiToken.issue(owner, "cli")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "PORTAL_URL": live_server.url,
        "PORTAL_TOKEN": token,
        "PORTAL_CONFIG": str(tmp_path / "absent.toml"),
    }
    portal = str(Path(sys.executable).parent / "portal")

    def cli(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([portal, *argv], env=env, capture_output=True, text=True, timeout=90)

    added = cli("keys", "add", str(home / ".ssh" / "id_ed25519.pub"))
    assert added.returncode == 0, added.stderr
    job = factories.job(owner, cert_devcluster, "sleep 300")
    tasks.submit_job.apply(args=[job.pk])
    job = run_until(job, {"running"}, timeout=120)
    ran = cli("ssh", str(job.pk), "--", "bash", "-c", 'echo "in $SLURM_JOB_ID; a b"')
    assert ran.returncode == 0, ran.stderr
    assert f"in {job.scheduler_job_id}; a b" in ran.stdout
    cached = home / ".cache" / "portal" / "ssh" / f"job-{job.pk}-cert.pub"
    assert oct(cached.stat().st_mode & 0o777) == "0o600"
    config = cli("ssh", "--print-config", str(job.pk))
    assert f"Host portal-job-{job.pk}" in config.stdout and "RemoteCommand" not in config.stdout


def test_a_personal_certificate_enters_its_job_only_and_ends_with_it(
    cert_devcluster, devcluster_info, owner, tmp_path
):
    """Whatever the client asks runs inside the job (the certificate's force-command), and
    once the job has ended the certificate enters nothing. Before: no force-command, so the
    same certificate was a plain login on the login node (``sbatch`` there) for up to an
    hour, after the job too; and a disabled account still got one."""
    import subprocess as sp

    key = keypair(tmp_path)
    api = APIClient()
    api.force_authenticate(owner)
    api.post("/api/v1/ssh-keys/", {"public_key": Path(f"{key}.pub").read_text()})
    job = factories.job(owner, cert_devcluster, "sleep 300")
    tasks.submit_job.apply(args=[job.pk])
    job = run_until(job, {"running"}, timeout=120)
    asked = {
        "public_key": Path(f"{key}.pub").read_text(),
        "identity_file": str(key),
        "certificate_file": str(tmp_path / "id-cert.pub"),
        "known_hosts_file": str(tmp_path / "known_hosts"),
    }
    issued = api.post(f"/api/v1/jobs/{job.pk}/ssh/", asked, format="json").json()
    (tmp_path / "id-cert.pub").write_text(issued["certificate"] + "\n")
    (tmp_path / "known_hosts").write_text(issued["known_hosts"])
    login = issued["ssh_args"]  # a shell in the job: the options, the login, "-t"
    assert login[-1] == "-t"
    raw = [*login[:-1], "-T", "--"]  # the person's own command, sent as they please

    inside = ssh([*raw, 'echo "job=$SLURM_JOB_ID step=${SLURM_STEP_ID:-none}"'])
    assert inside.returncode == 0, inside.stderr
    assert f"job={job.scheduler_job_id} step=" in inside.stdout
    assert "step=none" not in inside.stdout  # a step of the job, not a login shell

    # A name of its own: the other Slurm tests, running alongside, submit as this user too.
    probe = f"portal-ssh-probe-{uuid.uuid4().hex[:8]}"

    def probes() -> str:
        return (
            sp.run(
                [
                    "sacct",
                    "-n",
                    "-X",
                    "-P",
                    "-o",
                    "JobID",
                    f"--name={probe}",
                    "-u",
                    devcluster_info["default_user"],
                ],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.strip()
            + sp.run(
                ["squeue", "-h", "-n", probe, "-o", "%i"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.strip()
        )

    sp.run(["scancel", job.scheduler_job_id], check=True, timeout=30)
    run_until(job, {"cancelled"}, timeout=60)
    after_end = ssh([*raw, "sbatch", "--parsable", "-J", probe, "-p", "cpu", "--wrap", "true"])
    assert after_end.returncode != 0, after_end.stdout
    assert probes() == ""  # nothing was submitted through it

    # A disabled account gets no certificate (the API says why).
    from django.utils import timezone

    account = cert_devcluster.accounts.get(user=owner)
    account.disabled_at = timezone.now()
    account.save()
    running = factories.job(
        owner, cert_devcluster, "x", state="running", scheduler_job_id=job.scheduler_job_id
    )
    running.cluster_account = account
    running.save()
    refused = api.post(f"/api/v1/jobs/{running.pk}/ssh/", asked, format="json")
    assert refused.status_code == 403 and "is disabled" in str(refused.json())
