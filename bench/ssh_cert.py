"""Connection set-up with a fresh certificate vs a stored key: the cost of signing per
connection (certificate mode, clusters/certs.py).

Runs against the dev cluster (`make devcluster`, whose sshd trusts the portal's CA of
PORTAL_SSH_CA_KEY_FILES). Each round opens a connection (TCP, key exchange, host key check,
authentication), runs `true` and closes it; the two ways alternate round by round so that
drift on the machine affects both alike. Also times the signing alone.

    .venv/bin/python bench/ssh_cert.py [--rounds 40] [--signs 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("PORTAL_DEMO", "1")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from clusters import certs, ssh  # noqa: E402
from devtools import devcluster  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--signs", type=int, default=2000, help="certificates for the signing cost")
    args = parser.parse_args()

    info = devcluster.read_info(settings.DEVCLUSTER_DIR)
    user = info["default_user"]
    stored = ssh.load_private_key(Path(info["users"][user]["private_key_file"]).read_text())

    def connect(pkey) -> float:
        start = time.perf_counter()
        with ssh.Connection(info["ssh_host"], info["ssh_port"], user, pkey, info["host_key"]) as c:
            c.run(["true"])
        return time.perf_counter() - start

    try:
        connect(certs.issue(user, "bench", "bench", cluster=info["name"]))  # warm up, and check
    except (ssh.AuthenticationFailed, certs.CAMissing) as exc:
        sys.exit(
            f"the dev cluster does not accept the portal's certificates ({exc}); run make devcluster"
        )
    connect(stored)

    times: dict[str, list[float]] = {"stored key": [], "fresh certificate": []}
    for _ in range(args.rounds):
        times["stored key"].append(connect(stored))
        start = time.perf_counter()
        connect(certs.issue(user, "bench", "bench", cluster=info["name"]))
        times["fresh certificate"].append(time.perf_counter() - start)

    start = time.perf_counter()
    for _ in range(args.signs):
        certs.issue(user, "bench", "bench", cluster=info["name"])
    signing = (time.perf_counter() - start) / args.signs

    stored_ms = statistics.median(times["stored key"]) * 1000
    cert_ms = statistics.median(times["fresh certificate"]) * 1000
    print(
        f"dev cluster {info['ssh_host']}:{info['ssh_port']}: connect + authenticate + `true` + "
        f"close, {args.rounds} rounds each, interleaved (median)"
    )
    print(f"{'stored key':22} {stored_ms:8.2f} ms")
    print(
        f"{'fresh certificate':22} {cert_ms:8.2f} ms   ({cert_ms / stored_ms:.2f}x the stored key)"
    )
    print(
        f"{'signing alone':22} {signing * 1e6:8.0f} µs   (new Ed25519 key + certificate + "
        f"paramiko key; {args.signs} times)"
    )


if __name__ == "__main__":
    main()
