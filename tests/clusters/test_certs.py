"""The portal's SSH certificate authority (clusters/certs.py) with real keys, and the
certificate mode of clusters: no key is made or kept for their accounts."""

import base64
import re
import time

import pytest
from cryptography.hazmat.primitives import serialization
from django.core.exceptions import ValidationError

from clusters import acting, certs, pool, ssh
from clusters.models import Cluster, ClusterAccount
from common import crypto
from devtools import devcluster as devcluster_mod
from tests import factories


@pytest.fixture
def ca_files(tmp_path, settings):
    """Two CAs, the first signing (as during a rotation)."""
    paths = [tmp_path / "new_ca", tmp_path / "old_ca"]
    for path in paths:
        assert certs.new_ca_file(path)
    settings.PORTAL_SSH_CA_KEY_FILES = [str(p) for p in paths]
    return paths


def _public(path) -> bytes:
    key = certs.load_ca(str(path))
    return key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )


def test_a_certificate_names_only_the_cluster_user_and_is_signed_by_the_first_ca(ca_files):
    before = int(time.time())
    pkey = certs.issue("hpcuser", "alice", "submit job 42", cluster="devcluster")
    cert = certs.certificate_of(pkey)
    assert cert is not None
    cert.verify_cert_signature()  # raises unless the signature is good
    assert cert.signature_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ) == _public(ca_files[0])
    assert cert.type == serialization.SSHCertificateType.USER
    assert cert.valid_principals == [b"hpcuser"]
    assert before - 31 <= cert.valid_after <= before - 29
    assert cert.valid_before - cert.valid_after == 5 * 60 + 30  # PORTAL_SSH_CERT_MINUTES
    assert cert.critical_options == {}
    assert (
        cert.key_id.decode() == f"portal:alice:hpcuser@devcluster:submit_job_42:{cert.serial:016x}"
    )
    # The certificate is for the key paramiko signs with, made in memory for this one call.
    line = cert.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    assert pkey.asbytes() == base64.b64decode(line.split()[1])
    other = certs.certificate_of(certs.issue("hpcuser", "alice"))
    assert other is not None and other.serial != cert.serial
    assert other.key_id.decode().startswith("portal:alice:hpcuser@:sync:")


def test_the_lifetime_comes_from_the_setting(ca_files, settings):
    settings.PORTAL_SSH_CERT_MINUTES = 2
    cert = certs.certificate_of(certs.issue("hpcuser", "alice"))
    assert cert is not None and cert.valid_before - cert.valid_after == 2 * 60 + 30


def test_key_ids_are_sanitised_and_bounded(ca_files):
    hostile = 'x\nID forged (serial 1) CA; rm -rf / "quoted" \u00e9 ' + "y" * 500
    cert = certs.certificate_of(certs.issue("hpcuser", "bob smith", hostile, cluster="c"))
    assert cert is not None
    key_id = cert.key_id.decode()
    assert re.fullmatch(r"[A-Za-z0-9._@:+=-]+", key_id), key_id
    assert len(key_id) <= certs.KEY_ID_MAX
    assert key_id.startswith("portal:bob_smith:hpcuser@c:x_ID_forged_serial_1_CA_rm_-rf_")
    assert key_id.endswith(f":{cert.serial:016x}")  # the serial survives the cut


def test_source_address_is_a_critical_option_when_the_portals_addresses_are_set(ca_files, settings):
    settings.PORTAL_SSH_CERT_SOURCE_ADDRESSES = ["192.0.2.10/32", "2001:db8::/64"]
    cert = certs.certificate_of(certs.issue("hpcuser", "alice"))
    assert cert is not None
    assert cert.critical_options == {b"source-address": b"192.0.2.10/32,2001:db8::/64"}


def test_every_listed_ca_is_ours_and_a_rotation_changes_the_fingerprint(ca_files, settings):
    new, old = (certs.load_ca(str(p)).public_key() for p in ca_files)
    assert certs.is_ours(new) and certs.is_ours(old)
    rotated = certs.ca_fingerprint()
    settings.PORTAL_SSH_CA_KEY_FILES = [str(ca_files[1])]
    assert certs.ca_fingerprint() != rotated and not certs.is_ours(new)


def test_ca_files_are_private_and_made_once(tmp_path):
    path = tmp_path / "ca"
    assert certs.new_ca_file(path) and not certs.new_ca_file(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "ca.pub").read_text().startswith("ssh-ed25519 ")


def test_without_a_ca_a_certificate_cluster_cannot_connect_and_says_why(db, settings):
    settings.PORTAL_SSH_CA_KEY_FILES = []
    cluster = factories.cluster(ssh_auth=Cluster.SshAuth.CERTIFICATE)
    account = factories.account(cluster, None, "svc")
    with pytest.raises(ssh.AuthenticationFailed, match="PORTAL_SSH_CA_KEY_FILES"):
        pool.get(account)
    with pytest.raises(ValidationError, match="PORTAL_SSH_CA_KEY_FILES"):
        cluster.full_clean()


def test_a_plain_key_offers_no_certificate():
    key = ssh.load_private_key(crypto.new_ssh_key_pair("t")[0])
    assert certs.certificate_of(key) is None


# --- certificate mode keeps no key -------------------------------------------------------


def test_switching_a_cluster_to_certificates_deletes_its_stored_keys(db, ca_files, owner):
    cluster = factories.cluster()
    account = factories.account(cluster, owner, "hpcuser")
    account.generate_key_pair()
    account.save()
    cluster.ssh_auth = Cluster.SshAuth.CERTIFICATE
    cluster.save()
    account.refresh_from_db()
    assert (account.private_key_encrypted, account.public_key) == ("", "")
    with pytest.raises(ValidationError, match="certificates"):
        account.generate_key_pair()
    with pytest.raises(ValidationError, match="certificates"):
        account.set_private_key("-----BEGIN OPENSSH PRIVATE KEY-----\n")


def test_registering_the_dev_cluster_in_certificate_mode_stores_no_key(db, ca_files, tmp_path):
    key = tmp_path / "u_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot used\n")
    factories.user("alice")
    info = {
        "name": "devcluster",
        "ssh_host": "127.0.0.1",
        "ssh_port": 2222,
        "host_key": factories.HOST_KEY,
        "users": {"u": {"private_key_file": str(key)}},
        "default_user": "u",
    }
    devcluster_mod.register(info, {"alice": "u"})  # key pairs first (the default)
    assert ClusterAccount.objects.exclude(private_key_encrypted="").count() == 2
    cluster = devcluster_mod.register(info, {"alice": "u"}, "certificate")
    assert cluster.uses_certificates
    assert not ClusterAccount.objects.exclude(private_key_encrypted="").exists()
    cluster = devcluster_mod.register(info, {"alice": "u"})  # None keeps the mode
    assert cluster.uses_certificates
    assert not ClusterAccount.objects.exclude(private_key_encrypted="").exists()


def test_the_admin_makes_no_key_pair_for_a_certificate_clusters_account(client, db, ca_files):
    from django.urls import reverse

    cluster = factories.cluster(ssh_auth=Cluster.SshAuth.CERTIFICATE)
    account = factories.account(cluster, None, "svc")
    client.force_login(factories.user("root", superuser=True))
    answer = client.post(
        reverse("admin:jobs_clusteraccount_changelist"),
        {"action": "generate_key_pair", "_selected_action": [account.pk]},
        follow=True,
    )
    assert "no key pair is made or kept" in answer.content.decode()
    account.refresh_from_db()
    assert (account.private_key_encrypted, account.public_key) == ("", "")


# --- the connection pool ------------------------------------------------------------------


class _FakeConnection:
    def __init__(self, key_id: str, expires_at: float | None):
        self.key_id, self.expires_at, self.closed = key_id, expires_at, False

    @property
    def is_open(self) -> bool:
        return not self.closed

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and time.time() >= self.expires_at - 10

    in_use = False  # no other thread inside its SFTP session

    def close(self) -> None:
        self.closed = True


def test_the_pool_replaces_an_expired_or_rotated_connection_and_records_its_key_id(
    db, ca_files, settings, monkeypatch
):
    cluster = factories.cluster(ssh_auth=Cluster.SshAuth.CERTIFICATE)
    account = factories.account(cluster, None, "svc")
    made: list[_FakeConnection] = []

    def connect(acc):
        conn = _FakeConnection(f"id-{len(made)}", time.time() + 300)
        made.append(conn)
        return conn

    monkeypatch.setattr(ssh, "connect_account", connect)
    pool.close_all()
    try:
        assert pool.get(account) is pool.get(account) is made[0]
        assert acting.key_id.get() == "id-0"
        made[0].expires_at = time.time() + 5  # its certificate is about to expire
        assert pool.get(account) is made[1] and made[0].closed
        assert acting.key_id.get() == "id-1"
        settings.PORTAL_SSH_CA_KEY_FILES = [str(ca_files[1])]  # another CA signs now
        assert pool.get(account) is made[2]
        assert pool.with_connection(account, lambda conn: conn.key_id) == "id-2"
    finally:
        pool.close_all()


def test_each_action_gets_a_certificate_naming_who_asked_and_what(db, ca_files, monkeypatch):
    """sshd logs a certificate's key id at login: an action someone asked for gets its own
    connection (its key id names them and the action that opened it); the same kind of
    action again reuses it, whatever its target (five cancels, one login; before: one per
    job, so browsing twenty folders was twenty logins), the portal's bookkeeping shares
    one, and at most ACTIONS_PER_ACCOUNT are kept."""
    from identity import audit

    cluster = factories.cluster("c1", ssh_auth=Cluster.SshAuth.CERTIFICATE)
    alice, staff = factories.user("alice"), factories.user("staffer", superuser=True)
    account = factories.account(cluster, alice, "hpcuser")
    made: list[_FakeConnection] = []

    def connect(acc):
        cert = certs.certificate_of(ssh.account_key(acc))
        assert cert is not None
        made.append(_FakeConnection(cert.key_id.decode(), time.time() + 300))
        return made[-1]

    def key_id_of(user, what: str, target: str) -> str:
        with audit.action(what, user=user, account=account, target=target):
            return pool.get(account).key_id

    monkeypatch.setattr(ssh, "connect_account", connect)
    pool.close_all()
    try:
        sync = pool.get(account).key_id
        assert sync.startswith("portal:-:hpcuser@c1:sync:")
        submit = key_id_of(alice, "submit", "job 7")
        assert submit.startswith("portal:alice:hpcuser@c1:submit_job_7:")
        read = key_id_of(staff, "file_read", "job 7 stdout.log")
        assert read.startswith("portal:staffer:hpcuser@c1:file_read_job_7_stdout.log:")
        assert key_id_of(staff, "file_read", "job 7 stdout.log") == read  # followed: reused
        assert pool.get(account).key_id == sync
        assert len(made) == 3
        cancels = {key_id_of(alice, "cancel", f"job {n}") for n in range(5)}
        assert len(cancels) == 1 and len(made) == 4
        for what in ("release", "hold", "file_list", "file_download"):
            key_id_of(alice, what, "job 1")
        assert sum(not c.closed for c in made) == 1 + pool.ACTIONS_PER_ACCOUNT
    finally:
        pool.close_all()


def test_ssh_ca_makes_the_ca_once_and_prints_every_trusted_line(tmp_path, settings):
    from io import StringIO

    from django.core.management import call_command

    settings.PORTAL_SSH_CA_KEY_FILES = [str(tmp_path / "a"), str(tmp_path / "b")]
    out = StringIO()
    call_command(
        "ssh_ca", "--pub-out", str(tmp_path / "trusted.pub"), stdout=out, stderr=StringIO()
    )
    lines = out.getvalue().splitlines()
    assert [line.split()[0] for line in lines] == ["ssh-ed25519", "ssh-ed25519"]
    assert (tmp_path / "trusted.pub").read_text().splitlines() == lines
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o600
    again = StringIO()
    call_command("ssh_ca", stdout=again, stderr=StringIO())
    assert again.getvalue().splitlines() == lines  # made once, never replaced
    call_command("ssh_ca", "--new", str(tmp_path / "c"), stdout=again, stderr=StringIO())
    assert (tmp_path / "c").exists() and (tmp_path / "c.pub").exists()
