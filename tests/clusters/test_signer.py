"""The SSH certificate signer (clusters/signer.py) and where the CA key may live (#39):
only a process that signs reads it, a key others could read is refused, and the signer
decides from the database alone what it signs."""

import json
import os
import socket
import threading

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from clusters import certs, signer, ssh
from clusters.models import Cluster, ClusterAccount
from tests import factories
from tests.settings_process import production_env, run_python

pytestmark = pytest.mark.django_db


@pytest.fixture
def account(signing_ca):
    cluster = factories.cluster("certs", ssh_auth=Cluster.SshAuth.CERTIFICATE)
    return factories.account(cluster, factories.user("alice"), "hpcuser")


def public_line(key=None) -> str:
    key = key or ed25519.Ed25519PrivateKey.generate()
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )


def request(row, **more) -> dict:
    return {
        "account": row.pk,
        "public_key": public_line(),
        "purpose": "submit job 7",
        "requester": "alice",
        **more,
    }


def test_the_signer_signs_the_stored_cluster_user_naming_who_asked(account):
    answer = signer.answer(request(account, username="root", principal="root"))
    cert = serialization.load_ssh_public_identity(answer["certificate"].encode())
    assert isinstance(cert, serialization.SSHCertificate)
    assert cert.valid_principals == [b"hpcuser"]  # never a name from the request
    assert cert.key_id.decode().startswith("portal:alice:hpcuser@certs:submit_job_7:")


@pytest.mark.parametrize(
    "bad, message",
    [
        ([], "not a JSON object"),
        ({"account": "1"}, "account id"),
        ({"account": True}, "account id"),
        ({"account": 10**9, "public_key": "", "purpose": "", "requester": ""}, "OpenSSH"),
        ({"account": 1, "public_key": 5}, "must be text"),
        (
            {"account": 1, "public_key": "U\U0010068a AAAA", "purpose": "", "requester": ""},
            "OpenSSH",
        ),
    ],
)
def test_malformed_requests_are_refused(account, bad, message):
    assert message in signer.answer(bad)["error"]


def test_only_ed25519_keys_for_known_certificate_accounts(account):
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert "Ed25519" in signer.answer(request(account, public_key=public_line(rsa_key)))["error"]
    assert "no cluster account" in signer.answer(request(account, account=10**9))["error"]
    keys = factories.cluster("keys")
    other = factories.account(keys, factories.user("bob"), "bob")
    assert "does not use certificates" in signer.answer(request(other))["error"]


def test_the_signer_refuses_an_unproven_account_whatever_the_caller_checked(account):
    ClusterAccount.objects.filter(pk=account.pk).update(username="root")
    assert "changed outside the portal" in signer.answer(request(account))["error"]
    ClusterAccount.objects.filter(pk=account.pk).update(mapped_by="")
    assert "typed, not proven" in signer.answer(request(account))["error"]


# The signer's threads read the database on connections of their own: committed rows.
serving = pytest.mark.django_db(transaction=True)


@pytest.fixture
def served(tmp_path, settings, signing_ca):
    """A signer on a real Unix socket in a thread; this process asks it."""
    path = str(tmp_path / "signer.sock")
    server = signer.Server(path)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    settings.PORTAL_SSH_SIGNER_SOCKET = path
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


@serving
def test_a_process_with_a_signer_gets_its_certificate_from_it(served, account, monkeypatch):
    def no_local_signing(*args, **kwargs):
        raise AssertionError("a process with a signer signed locally")

    monkeypatch.setattr(certs, "issue", no_local_signing)
    pkey = ssh.account_key(account)
    cert = certs.certificate_of(pkey)
    assert cert is not None and cert.valid_principals == [b"hpcuser"]
    assert oct(os.stat(served.server_address).st_mode & 0o777) == "0o660"


@serving
def test_the_signer_serves_only_its_own_and_listed_uids(served, account):
    served.uids = {os.geteuid() + 4242}
    with pytest.raises(ssh.AuthenticationFailed, match="may not ask this signer"):
        ssh.account_key(account)


@serving
def test_an_oversized_request_gets_no_certificate(served, account):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect(served.server_address)
        try:
            sock.sendall(b'{"account": 1, "pad": "' + b"x" * 100_000)
        except OSError:
            pass  # the signer stopped reading and closed
        try:
            answer = sock.recv(4096)
        except OSError:
            answer = b""
    assert b"certificate" not in answer


def test_a_signer_that_is_down_is_a_transient_failure(tmp_path, settings, account):
    settings.PORTAL_SSH_SIGNER_SOCKET = str(tmp_path / "nobody-here.sock")
    with pytest.raises(ssh.ClusterUnreachable, match="did not answer"):
        ssh.account_key(account)


# --- the CA key file ----------------------------------------------------------------------


def test_a_ca_key_others_can_read_is_refused(signing_ca):
    os.chmod(signing_ca, 0o640)
    with pytest.raises(certs.CAMissing, match="open to group or others"):
        certs.check_ca_files()
    with pytest.raises(certs.CAMissing):
        certs.issue("hpcuser", "alice")


def test_a_ca_key_of_another_user_is_refused(signing_ca):
    os.chown(signing_ca, 65534, -1)  # nobody's (tests run as root: see deploy/run-tests.sh)
    with pytest.raises(certs.CAMissing, match="belongs to uid 65534"):
        certs.load_ca(str(signing_ca))


def test_a_worker_that_signs_will_not_start_with_an_open_ca_key(signing_ca):
    from portal.celery import check_signing_keys

    os.chmod(signing_ca, 0o644)
    with pytest.raises(certs.CAMissing):
        check_signing_keys()


def test_the_signer_command_will_not_start_with_an_open_ca_key(signing_ca, tmp_path):
    from django.core.management import CommandError, call_command

    os.chmod(signing_ca, 0o604)
    with pytest.raises(CommandError, match="open to group or others"):
        call_command("ssh_signer", "--socket", str(tmp_path / "s.sock"))


def test_outside_demo_the_ca_needs_source_addresses_and_the_web_tier_never_reads_it(tmp_path):
    key = tmp_path / "ca"
    certs.new_ca_file(key)
    env = {**production_env(), "PORTAL_SSH_CA_KEY_FILES": str(key)}
    result = run_python("import django; django.setup()", env)
    assert "PORTAL_SSH_CERT_SOURCE_ADDRESSES is not" in result.stderr
    env["PORTAL_SSH_CERT_SOURCE_ADDRESSES"] = "192.0.2.0/24"
    assert run_python("import django; django.setup()", env).returncode == 0
    web = run_python("import portal.asgi", env)
    assert "The web tier must not read the SSH CA key" in web.stderr
    env.pop("PORTAL_SSH_CA_KEY_FILES")
    env["PORTAL_SSH_SIGNER_SOCKET"] = str(tmp_path / "signer.sock")
    web = run_python("import portal.asgi; print('web ok')", env)
    assert web.stdout.strip() == "web ok", web.stderr[-2000:]


def test_a_request_line_is_json(account):
    # What the client sends is what the signer parses (one line, one object).
    line = json.dumps(request(account)).encode()
    assert b"\n" not in line and "certificate" in signer.answer(json.loads(line))
