"""Who listens on a TCP port of this node: the users (uids) of its listening sockets, from
the kernel's tables (/proc/net/tcp and tcp6, which every user may read on Linux).

A session's app listens on a port the job chose free a moment before; on a node shared
between users, another user's process could take that port first. Their server would
then receive the person's requests. The registration (session_register.sh) and the
session guard (session_guard.py, for an app on ``{port}``) refuse a port that any other
user listens on.

Standard library only (Python 3.8+): it runs with the node's python3.

    python3 port_owner.py PORT    # prints the other users' uids; exit 1 if there are any
"""

from __future__ import annotations

import os
import sys

LISTEN = "0A"
TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def parse(text: str, port: int) -> set:
    """The uids of the sockets listening on ``port`` in one table's ``text``."""
    found = set()
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8 or fields[3] != LISTEN:
            continue
        try:
            local = int(fields[1].rsplit(":", 1)[1], 16)
            uid = int(fields[7])
        except (IndexError, ValueError):
            continue
        if local == port:
            found.add(uid)
    return found


def listeners(port: int, tables=TABLES):
    """The uids listening on ``port``; None where no table could be read."""
    uids, read = set(), False
    for path in tables:
        try:
            with open(path) as fh:
                text = fh.read()
        except OSError:
            continue
        read = True
        uids |= parse(text, port)
    return uids if read else None


def others(port: int) -> set:
    """The users other than this process's listening on ``port`` (empty: only ours, or
    nothing to tell where the tables cannot be read)."""
    uids = listeners(port)
    return set() if uids is None else uids - {os.getuid()}


if __name__ == "__main__":
    held = others(int(sys.argv[1]))
    print(" ".join(str(uid) for uid in sorted(held)))
    sys.exit(1 if held else 0)
