"""What the portal gives OpenSSH's client (clusters/openssh.py): every word a person
may have typed stays one quoted word, the pinned key is the only one known, and the key
and certificate are written as OpenSSH reads them."""

import shlex
import subprocess

import pytest
from cryptography.hazmat.primitives import serialization

from clusters import certs, openssh

PINNED = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJH5qqfoDBzT4ES7shubl5Ks+fqqmDWWLp9y3mabioXX"
HOSTILE = [
    "/home/u/with space",
    '/home/u/it\'s "quoted"',
    "/home/u/new\nline",
    "/home/u/$(touch pwned)",
    "/home/u/`touch pwned`",
    "/home/u/-rf",
    "/home/u/; rm -rf ~ #",
    "/home/u/*",
]


@pytest.mark.parametrize("path", HOSTILE)
def test_the_writer_command_keeps_a_hostile_path_one_word(path):
    command = openssh.writer_command(path, 1234)
    assert shlex.split(command) == [
        "env",
        "LC_ALL=C",
        "dd",
        f"of={path}",
        "bs=1M",
        "seek=1234",
        "oflag=seek_bytes,nofollow",
        "conv=notrunc,nocreat",
        "status=none",
    ]


def test_a_shell_runs_the_writer_command_on_hostile_names_and_nothing_else(tmp_path):
    """The command as the cluster's shell sees it (with this machine's GNU dd): the bytes
    land at the offset of the file named, nothing after it is cut, nothing is run."""
    for i, name in enumerate(n.rsplit("/", 1)[1] for n in HOSTILE):
        target = tmp_path / f"{i}-{name}"
        target.write_bytes(b"0123456789")
        command = openssh.writer_command(str(target), 3)
        subprocess.run(["sh", "-c", command], input=b"abc", cwd=tmp_path, check=True)
        assert target.read_bytes() == b"012abc6789"
    assert not (tmp_path / "pwned").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{i}-{n.rsplit('/', 1)[1]}" for i, n in enumerate(HOSTILE)
    )


def test_the_writer_never_creates_a_file_nor_follows_a_link(tmp_path):
    outside = tmp_path / "outside"
    outside.write_bytes(b"secret")
    (tmp_path / "link").symlink_to(outside)
    for name, says in (("link", b"symbolic links"), ("missing", b"No such file")):
        command = openssh.writer_command(str(tmp_path / name), 0)
        done = subprocess.run(["sh", "-c", command], input=b"XX", capture_output=True)
        assert done.returncode != 0 and says in done.stderr
    assert outside.read_bytes() == b"secret" and not (tmp_path / "missing").exists()


def test_the_writer_wants_an_absolute_path_and_an_offset():
    for path, offset in (("relative/file", 0), ("-rf", 0), ("/a\0b", 0), ("/a", -1)):
        with pytest.raises(ValueError):
            openssh.writer_command(path, offset)


def test_known_hosts_holds_only_the_pinned_key():
    assert openssh.known_hosts_line("127.0.0.1", 2230, PINNED + " comment") == (
        f"[127.0.0.1]:2230 {PINNED}\n"
    )
    assert openssh.known_hosts_line("login.example.org", 22, PINNED).startswith(
        "login.example.org ssh-ed25519 "
    )
    assert openssh.known_hosts_line("::1", 2222, PINNED).startswith("[::1]:2222 ")
    # Whatever follows the key (a comment, more lines) is not written.
    two = openssh.known_hosts_line("h", 22, f"{PINNED}\n[evil]:22 {PINNED}")
    assert two == f"h {PINNED}\n"


@pytest.mark.parametrize(
    "host, pinned",
    [
        ("127.0.0.1", "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"),
        ("127.0.0.1", "ssh-ed25519"),
        ("127.0.0.1", "ssh-ed25519 AAAA$(x)"),
        ("127.0.0.1", "ssh-ed25519,* AAAA"),
        ("evil host", PINNED),
        ("a,*", PINNED),
        ("!negated", PINNED),
        ("host\n", PINNED),
    ],
)
def test_what_openssh_cannot_be_given(host, pinned):
    with pytest.raises(openssh.Unusable):
        openssh.known_hosts_line(host, 2230, pinned)


def _option_values(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, word in enumerate(argv) if word == "-o")


def test_the_master_reads_no_config_and_knows_only_the_pinned_key():
    argv = openssh.master_argv(
        "/usr/bin/ssh",
        "/dev/shm/bulk-x/ctl",
        "/dev/shm/bulk-x/key",
        "/dev/shm/bulk-x/key-cert.pub",
        "/dev/shm/bulk-x/kh",
        "-oProxyCommand=evil",
        2230,
        "-oProxyCommand=evil",
        connect_timeout=10,
        keepalive=30,
    )
    assert argv[:4] == ["/usr/bin/ssh", "-M", "-N", "-T"]
    assert argv[argv.index("-F") + 1] == "/dev/null"
    options = _option_values(argv)
    assert options["UserKnownHostsFile"] == "/dev/shm/bulk-x/kh"
    assert options["GlobalKnownHostsFile"] == "/dev/null"
    assert options["StrictHostKeyChecking"] == "yes"
    assert options["BatchMode"] == "yes" and options["IdentitiesOnly"] == "yes"
    assert options["IdentityAgent"] == "none" and options["ControlPersist"] == "no"
    assert options["CertificateFile"] == "/dev/shm/bulk-x/key-cert.pub"
    assert options["ServerAliveInterval"] == "30" and "ProxyCommand" not in options
    # The user is -l's value, the host comes after "--": neither is ever an option.
    assert argv[-3:] == ["-oProxyCommand=evil", "--", "-oProxyCommand=evil"]
    assert argv[argv.index("-l") + 1] == "-oProxyCommand=evil"


X86_AES = "processor\t: 0\nflags\t\t: fpu vme sse2 aes pclmulqdq avx2\n"
ARM_AES = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2\n"
NO_AES = "processor\t: 0\nflags\t\t: fpu vme sse2 aesni_like\nmodel name\t: aes chip\n"


@pytest.mark.parametrize(
    ("setting", "cpuinfo", "expected"),
    [
        ("", X86_AES, openssh.AES_FIRST),
        ("", ARM_AES, openssh.AES_FIRST),
        ("", NO_AES, ""),  # a flag that only contains "aes", a model named so: not it
        ("", "", ""),  # no /proc/cpuinfo
        ("openssh", X86_AES, ""),
        ("chacha20-poly1305@openssh.com", X86_AES, "chacha20-poly1305@openssh.com"),
    ],
)
def test_a_master_offers_aes_gcm_first_only_where_the_cpu_has_aes(setting, cpuinfo, expected):
    assert openssh.ciphers(setting, cpuinfo) == expected


def test_the_ciphers_go_to_the_master_and_a_server_without_gcm_still_agrees():
    argv = openssh.master_argv(
        "ssh",
        "c",
        "k",
        None,
        "kh",
        "h",
        22,
        "u",
        connect_timeout=1,
        keepalive=0,
        ciphers=openssh.AES_FIRST,
    )
    offered = _option_values(argv)["Ciphers"].split(",")
    assert offered[0] == "aes128-gcm@openssh.com"
    assert {"chacha20-poly1305@openssh.com", "aes256-ctr"} <= set(offered)
    without = openssh.master_argv(
        "ssh", "c", "k", None, "kh", "h", 22, "u", connect_timeout=1, keepalive=0
    )
    assert "Ciphers" not in _option_values(without)


def test_a_stored_key_has_no_certificate_option_and_no_keepalive_when_off():
    argv = openssh.master_argv(
        "ssh", "c", "k", None, "kh", "h", 22, "u", connect_timeout=0.2, keepalive=0
    )
    options = _option_values(argv)
    assert "CertificateFile" not in options and "ServerAliveInterval" not in options
    assert options["ConnectTimeout"] == "1"


@pytest.mark.parametrize("path", HOSTILE)
def test_a_client_carries_the_command_as_one_argument_and_never_connects_alone(path):
    command = openssh.writer_command(path, 0)
    argv = openssh.client_argv("ssh", "/s/ctl", "/s/kh", "host", 2230, "user", command)
    assert argv[-3:] == ["--", "host", command]
    assert argv[argv.index("-S") + 1] == "/s/ctl"
    assert argv[argv.index("-e") + 1] == "none"  # binary bytes: no escape character
    options = _option_values(argv)
    assert options["ControlMaster"] == "no" and options["ProxyCommand"] == "false"
    assert options["BatchMode"] == "yes" and options["StrictHostKeyChecking"] == "yes"


def test_the_key_and_certificate_are_what_openssh_reads(signing_ca, tmp_path):
    pkey = certs.issue("hpcuser", "alice", "file_upload into home", cluster="dev")
    text = openssh.private_key_text(pkey)
    assert text.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    loaded = serialization.load_ssh_private_key(text.encode(), password=None)
    assert (
        loaded.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .split()[1]
        == pkey.get_base64().encode()
    )
    line = openssh.certificate_line(pkey)
    assert line is not None and line.startswith("ssh-ed25519-cert-v01@openssh.com ")
    cert = serialization.load_ssh_public_identity(line.strip().encode())
    offered = certs.certificate_of(pkey)
    assert offered is not None and cert.public_bytes() == offered.public_bytes()
    # OpenSSH's own ssh-keygen reads both as they are written.
    (tmp_path / "key").write_text(text)
    (tmp_path / "key").chmod(0o600)
    (tmp_path / "key-cert.pub").write_text(line)
    public = subprocess.run(["ssh-keygen", "-y", "-f", tmp_path / "key"], capture_output=True)
    assert public.stdout.split()[1] == pkey.get_base64().encode()
    shown = subprocess.run(
        ["ssh-keygen", "-L", "-f", tmp_path / "key-cert.pub"], text=True, capture_output=True
    )
    assert "portal:alice:hpcuser@dev:file_upload_into_home:" in shown.stdout


def test_a_stored_key_is_written_as_it_is_and_has_no_certificate():
    import paramiko

    rsa = paramiko.RSAKey.generate(2048)
    text = openssh.private_key_text(rsa)
    assert "PRIVATE KEY-----" in text
    assert serialization.load_pem_private_key(text.encode(), password=None)
    assert openssh.certificate_line(rsa) is None
