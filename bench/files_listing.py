"""How long the file manager takes to open a folder of 100,000 entries, against OpenSSH's
own sftp client listing the same folder through the same sshd (the floor: a C client).

Runs against the dev cluster (`make devcluster`), as its first user, in a folder of its
home made for the run and removed after it.

    .venv/bin/python bench/files_listing.py [--entries 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("PORTAL_DEMO", "1")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.paginator import Paginator  # noqa: E402

from clusters import ssh  # noqa: E402
from devtools import devcluster  # noqa: E402
from files import remote  # noqa: E402

MAKE = "import os,sys; d=sys.argv[1]; os.makedirs(d); [open(f'{d}/run-{i:06d}.pt','w').close() for i in range(int(sys.argv[2]))]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    info = devcluster.read_info(settings.DEVCLUSTER_DIR)
    user = info["default_user"]
    key_file = info["users"][user]["private_key_file"]
    key = Path(key_file).read_text()
    conn = ssh.Connection(
        info["ssh_host"], info["ssh_port"], user, ssh.load_private_key(key), info["host_key"]
    ).open()
    home = conn.run(["sh", "-c", 'printf %s "$HOME"']).stdout
    folder = f"{home}/portal-bench-listing-{uuid.uuid4().hex[:8]}"
    conn.run(["python3", "-c", MAKE, folder, str(args.entries)], timeout=600)
    try:
        portal = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            with conn.sftp_session() as sftp:
                entries = remote.listing(sftp, folder)
            page = Paginator(remote.ordered(entries, "modified", True), 200).get_page(1)
            assert len(entries) == args.entries and len(page.object_list) == 200
            portal.append(time.perf_counter() - start)
        with tempfile.NamedTemporaryFile("w") as hosts, tempfile.NamedTemporaryFile("w") as batch:
            hosts.write(f"[{info['ssh_host']}]:{info['ssh_port']} {info['host_key']}\n")
            hosts.flush()
            batch.write(f"ls -l {folder}\n")
            batch.flush()
            floor = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                done = subprocess.run(
                    [
                        "sftp",
                        "-q",
                        "-b",
                        batch.name,
                        "-i",
                        key_file,
                        "-P",
                        str(info["ssh_port"]),
                        "-o",
                        f"UserKnownHostsFile={hosts.name}",
                        "-o",
                        "BatchMode=yes",
                        f"{user}@{info['ssh_host']}",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                floor.append(time.perf_counter() - start)
                assert done.returncode == 0, done.stderr
    finally:
        conn.run(["rm", "-rf", "--", folder], timeout=600)
        conn.close()
    best, base = min(portal), min(floor)
    print(f"folder of {args.entries:,} entries, best of {args.repeat}:")
    print(f"  portal (SFTP listing, sorted by date, first page of 200): {best:.2f} s")
    print(f"  OpenSSH sftp `ls -l` of the same folder (C client):       {base:.2f} s")
    print(f"  ratio portal / sftp: {best / base:.2f}  (target: under 2 s)")


if __name__ == "__main__":
    main()
