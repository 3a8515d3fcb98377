"""Moving a big file through the file manager, against `scp` of the same file through the
same sshd as the same cluster user, in the same run: a file of random bytes (1 GiB by
default, made once) uploaded with tus (files/uploads.py: a POST, then PATCHes of
PORTAL_UPLOAD_CHUNK_BYTES, as the page sends them) and downloaded with `curl -o` (files/
streaming.py); `scp` up and down beside each (down twice where the portal's OpenSSH
masters put AES-GCM first, PORTAL_BULK_SSH_CIPHERS: at OpenSSH's own cipher order, as a
person runs it, and with the masters' ciphers). Targets (issue #42): upload at least 0.8x
scp's throughput, download at least 0.9x.

The served stack as `make demo` runs it (gunicorn with the uvicorn worker, bench/
loadstack.py) on a throwaway SQLite database; the dev cluster (`make devcluster`)
registered in certificate mode as `make demo` does, one person mapped to its first user;
scp logs in as that user with the dev cluster's key. The clients are not the bottleneck:
curl for downloads, and for uploads this process with http.client on a kept-alive
connection, each chunk's body sent from the file with sendfile (no copy in the client). An upload's time runs from
its POST to the answer to its last PATCH, so it includes the sha256 the portal computes
on the cluster before answering (timed apart as well). Every copy's sha256 is checked
against the local file's, outside the timings. Beside MB/s: the CPU seconds per GiB of
the web server and of each client (http.client here, curl, scp with its ssh), since
sshd, the client and the web worker share the machine's cores; and the web worker's peak
memory, which must not grow with the file.

    .venv/bin/python bench/files_transfer.py [--mib 1024] [--repeat 3]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import http.client
import os
import re
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TMP = Path(tempfile.mkdtemp(prefix="bench-transfer-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("PORTAL_DEMO", "1")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{TMP / 'bench.sqlite3'}")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from bench.loadstack import LoadStack  # noqa: E402
from clusters import bulk, openssh, ssh  # noqa: E402
from clusters.models import Cluster  # noqa: E402
from devtools import devcluster  # noqa: E402
from files.uploads import HASH  # noqa: E402

PERSON = "bench-transfer"
BLOCK = 16 * 1024 * 1024


def make_file(path: Path, size: int) -> str:
    """``size`` random bytes at ``path``; their sha256."""
    digest = hashlib.sha256()
    with path.open("wb") as out:
        left = size
        while left:
            block = os.urandom(min(BLOCK, left))
            digest.update(block)
            out.write(block)
            left -= len(block)
    return digest.hexdigest()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


class Portal:
    """The file manager of the served stack, as one signed-in person."""

    def __init__(self, stack: LoadStack, cluster: str, cookie: str):
        self.stack, self.cluster = stack, cluster
        csrf = secrets.token_hex(16)  # any 32 characters: the cookie and the header match
        self.headers = {
            "Cookie": f"{cookie}; {settings.CSRF_COOKIE_NAME}={csrf}",
            "X-CSRFToken": csrf,
            "Tus-Resumable": "1.0.0",
        }
        self.cookie = cookie

    def url(self, what: str) -> str:
        return f"/files/{self.cluster}/home/{what}/"

    def upload(self, local: Path, folder: str, name: str) -> str:
        """tus: POST, then one PATCH per chunk; the sha256 the last answer carries."""
        size = local.stat().st_size
        chunk = settings.PORTAL_UPLOAD_CHUNK_BYTES
        meta = ",".join(
            f"{k} {base64.b64encode(v.encode()).decode()}"
            for k, v in (("filename", name), ("path", folder))
        )
        conn = http.client.HTTPConnection("127.0.0.1", self.stack.port, timeout=900)
        conn.request(
            "POST",
            self.url("uploads"),
            headers={**self.headers, "Upload-Length": str(size), "Upload-Metadata": meta},
        )
        made = conn.getresponse()
        made.read()
        assert made.status == 201, (made.status, made.headers)
        location = made.headers["Location"]
        offset, digest = 0, ""
        with local.open("rb") as f:
            while offset < size:
                count = min(chunk, size - offset)
                conn.putrequest("PATCH", location)
                for name, value in {
                    **self.headers,
                    "Content-Type": "application/offset+octet-stream",
                    "Content-Length": str(count),
                    "Upload-Offset": str(offset),
                }.items():
                    conn.putheader(name, value)
                conn.endheaders()
                # The chunk straight from the file to the socket (sendfile: the kernel
                # copies it), as a browser streams a file's slice: the client takes as
                # little of the shared cores as it can.
                assert conn.sock is not None
                conn.sock.sendfile(f, offset, count)
                answer = conn.getresponse()
                text = answer.read()
                assert answer.status == 204, (answer.status, text[:300])
                offset = int(answer.headers["Upload-Offset"])
                digest = answer.headers.get("Upload-Sha256", "")
        conn.close()
        return digest

    def download(self, rel: str, out: Path) -> None:
        done = subprocess.run(
            [
                "curl",
                "-sS",
                "--fail",
                "-o",
                str(out),
                "-H",
                f"Cookie: {self.cookie}",
                f"{self.stack.base_url}{self.url('download')}?path={rel}",
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr


class Scp:
    """OpenSSH's scp as the dev cluster's first user, its host key pinned."""

    def __init__(self, info: dict, user: str):
        self.host = f"{user}@{info['ssh_host']}"
        hosts = TMP / "known_hosts"
        hosts.write_text(f"[{info['ssh_host']}]:{info['ssh_port']} {info['host_key']}\n")
        self.argv = [
            "scp",
            "-q",
            "-i",
            info["users"][user]["private_key_file"],
            "-P",
            str(info["ssh_port"]),
            "-o",
            f"UserKnownHostsFile={hosts}",
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
        ]

    def copy(self, source: str, target: str) -> None:
        done = subprocess.run(
            [*self.argv, source, target], capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, done.stderr

    def up(self, local: Path, rel: str) -> None:
        self.copy(str(local), f"{self.host}:{rel}")

    def down(self, rel: str, out: Path, ciphers: str = "") -> None:
        """``ciphers``: OpenSSH's Ciphers list (its own order when empty)."""
        chosen = ["-o", f"Ciphers={ciphers}"] if ciphers else []
        done = subprocess.run(
            [*self.argv, *chosen, f"{self.host}:{rel}", str(out)],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr


def _ppids() -> dict[int, int]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = int(
                    (entry / "stat").read_text().rpartition(")")[2].split()[1]
                )
            except (OSError, IndexError, ValueError):
                continue
    return found


def web_cpu(stack: LoadStack) -> float:
    """CPU seconds of the web server's processes (gunicorn and its worker)."""
    master = stack.procs["web"].pid
    total = 0
    for pid in [master, *(c for c, p in _ppids().items() if p == master)]:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    """CPU seconds of this process (the upload's client) and its reaped children (curl,
    scp and its ssh)."""
    me, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def web_peak_kib(stack: LoadStack) -> int:
    """The largest peak RSS (VmHWM) among the web server's processes (its workers)."""
    parents = _ppids()
    master = stack.procs["web"].pid
    peak = 0
    for pid in [master, *(c for c, p in parents.items() if p == master)]:
        try:
            found = re.search(r"^VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
        except OSError:
            continue
        peak = max(peak, int(found.group(1)) if found else 0)
    return peak


@dataclass
class Figures:
    """Each run's MB/s, and CPU seconds per GiB of the web server and of the client."""

    rates: list[float] = field(default_factory=list)
    web: list[float] = field(default_factory=list)
    client: list[float] = field(default_factory=list)


def measured(figures: Figures, size: int, stack: LoadStack, run) -> None:
    """``run()`` timed: its MB/s and CPU per GiB added to ``figures``."""
    web, client, start = web_cpu(stack), own_cpu(), time.perf_counter()
    run()
    took, gib = time.perf_counter() - start, size / 2**30
    figures.rates.append(size / 1e6 / took)
    figures.web.append((web_cpu(stack) - web) / gib)
    figures.client.append((own_cpu() - client) / gib)


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="file size in MiB")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not shutil.which("scp") or not shutil.which("curl"):
        sys.exit("bench/files_transfer.py: needs OpenSSH's scp and curl")
    size = args.mib * 1024 * 1024
    info = devcluster.read_info(settings.DEVCLUSTER_DIR)
    user = info["default_user"]

    call_command("migrate", verbosity=0)
    get_user_model().objects.create_user(PERSON)
    cluster = devcluster.register(info, {PERSON: user}, Cluster.SshAuth.CERTIFICATE)
    key = ssh.load_private_key(Path(info["users"][user]["private_key_file"]).read_text())
    conn = ssh.Connection(info["ssh_host"], info["ssh_port"], user, key, info["host_key"]).open()
    home = conn.run(["sh", "-c", 'printf %s "$HOME"']).stdout
    folder = f"portal-bench-transfer-{secrets.token_hex(4)}"
    conn.run(["mkdir", "--", f"{home}/{folder}"])

    def cluster_sha256(rel: str) -> str:
        return conn.run(["sh", "-c", HASH, "sh", f"{home}/{rel}"], timeout=600).stdout.split()[0]

    local = TMP / "random.bin"
    t = time.perf_counter()
    digest = make_file(local, size)
    print(f"{args.mib:,} MiB of random bytes made in {time.perf_counter() - t:.1f} s")
    stack = LoadStack(
        os.environ["DATABASE_URL"], TMP / "stack", web_workers=1, redis_db=12, prefix="xferweb"
    )
    # The ciphers the portal's OpenSSH masters offer (PORTAL_BULK_SSH_CIPHERS): scp is
    # measured at OpenSSH's own order, as a person runs it, and with the same ones.
    ciphers = openssh.ciphers(settings.PORTAL_BULK_SSH_CIPHERS, bulk._cpuinfo())
    names = ["portal up", "scp up", "portal down", "scp down"]
    if ciphers:
        names.append("scp down, same ciphers")
    figures = {k: Figures() for k in names}
    hashing: list[float] = []  # the same SHA-256 on the cluster, of each copy, timed apart
    scp_hashing: list[float] = []
    try:
        stack.start()
        portal = Portal(stack, cluster.name, stack.cookie_header(PERSON))
        scp = Scp(info, user)
        print(
            f"chunks: {settings.PORTAL_UPLOAD_CHUNK_BYTES / 2**20:g} MiB up "
            f"(PORTAL_UPLOAD_CHUNK_BYTES), {settings.PORTAL_DOWNLOAD_CHUNK_BYTES / 2**20:g} MiB "
            f"down; {os.cpu_count()} cores; MB/s (10^6 bytes/s); the portal's masters "
            f"offer {ciphers.split(',')[0] + ' first' if ciphers else 'OpenSSH own ciphers'}"
        )
        rel, scp_rel, out = f"{folder}/portal.bin", f"{folder}/scp.bin", TMP / "down.bin"
        answered: list[str] = []
        for n in range(args.repeat):
            answered.clear()
            # Who goes first alternates, so neither always meets a warmer machine.
            ups = [
                ("portal up", lambda: answered.append(portal.upload(local, folder, "portal.bin"))),
                ("scp up", lambda: scp.up(local, scp_rel)),
            ]
            for name, run in ups if n % 2 == 0 else ups[::-1]:
                measured(figures[name], size, stack, run)
            assert answered == [digest], f"the portal answered sha256 {answered}, not {digest}"
            hashed = time.perf_counter()
            assert cluster_sha256(rel) == digest, "the portal's upload differs"
            hashing.append(time.perf_counter() - hashed)
            hashed = time.perf_counter()
            assert cluster_sha256(scp_rel) == digest, "scp's upload differs"
            scp_hashing.append(time.perf_counter() - hashed)
            downs = [
                ("portal down", lambda: portal.download(rel, out)),
                ("scp down", lambda: scp.down(rel, out)),
            ]
            if ciphers:
                downs.append(("scp down, same ciphers", lambda: scp.down(rel, out, ciphers)))
            for name, run in downs[n % len(downs) :] + downs[: n % len(downs)]:
                measured(figures[name], size, stack, run)
                assert sha256_of(out) == digest, f"{name}: the copy differs"
                out.unlink()
            conn.run(["rm", "-f", "--", f"{home}/{rel}", f"{home}/{scp_rel}"])
            up, down = figures["portal up"].rates[-1], figures["portal down"].rates[-1]
            scp_up, scp_down = figures["scp up"].rates[-1], figures["scp down"].rates[-1]
            print(
                f"run {n + 1}: up portal {up:6.1f} scp {scp_up:6.1f} ({up / scp_up:.2f}x) | "
                f"down portal {down:6.1f} scp {scp_down:6.1f} ({down / scp_down:.2f}x)",
                flush=True,
            )
        peak = web_peak_kib(stack)
    finally:
        stack.stop()
        conn.run(["rm", "-rf", "--", f"{home}/{folder}"])
        conn.close()
        shutil.rmtree(TMP, ignore_errors=True)

    print(
        f"\n{args.mib:,} MiB, {args.repeat} runs: MB/s median (min-max), and CPU seconds per "
        "GiB (medians) of the web server and of the client (http.client in this process up, "
        "curl down; scp and its ssh)"
    )
    for name, figs in figures.items():
        web = f"web {median(figs.web):5.2f}  " if name.startswith("portal") else " " * 12
        print(
            f"  {name:22} {median(figs.rates):6.1f} ({min(figs.rates):.1f}-{max(figs.rates):.1f})"
            f"   {web}client {median(figs.client):.2f}"
        )
    print(
        f"  the portal's upload includes the SHA-256 on the cluster before its last answer: "
        f"{median(hashing):.1f} s of it, timed apart"
    )
    # The upload three ways, each run's times: as answered (with the SHA-256 the portal
    # computes on the cluster, which scp does not); to the last byte on the cluster (that
    # SHA-256's time, measured apart on the same file, taken out); and against scp followed
    # by the same SHA-256 over ssh (a copy known to be whole, as the portal's is).
    seconds = {
        name: [size / 1e6 / rate for rate in figures[name].rates]
        for name in ("portal up", "scp up")
    }
    portal_s, scp_s = seconds["portal up"], seconds["scp up"]
    ways = {
        "upload, as answered (with its SHA-256) / scp": (portal_s, scp_s, 0.8),
        "upload to the last byte on the cluster / scp": (
            [t - h for t, h in zip(portal_s, hashing, strict=True)],
            scp_s,
            0.8,
        ),
        "upload with its SHA-256 / scp then the SHA-256": (
            portal_s,
            [t + h for t, h in zip(scp_s, scp_hashing, strict=True)],
            0.8,
        ),
        "download / scp": (
            [size / 1e6 / r for r in figures["portal down"].rates],
            [size / 1e6 / r for r in figures["scp down"].rates],
            0.9,
        ),
    }
    if ciphers:
        ways["download / scp with the portal's ciphers"] = (
            [size / 1e6 / r for r in figures["portal down"].rates],
            [size / 1e6 / r for r in figures["scp down, same ciphers"].rates],
            0.9,
        )
    for label, (ours, theirs, target) in ways.items():
        ratios = [b / a for a, b in zip(ours, theirs, strict=True)]  # throughput: time's inverse
        ratio = median(theirs) / median(ours)
        print(
            f"  {label:48} {ratio:.2f}x of the medians (each run {min(ratios):.2f}-"
            f"{max(ratios):.2f}x); target {target}x: {'met' if ratio >= target else 'missed'}"
        )
    print(f"  web worker's peak memory (VmHWM): {peak / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
