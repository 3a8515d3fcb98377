"""A free loopback port that every client the tests and benches use will connect to.

The kernel's ephemeral range is a host setting: on some machines it reaches down into
ports that Chromium refuses to load (``net::ERR_UNSAFE_PORT``), such as 6667. A port is
taken from the kernel and given back to it until one outside Chromium's list comes up.
"""

from __future__ import annotations

import socket

# Chromium's restricted ports (net/base/port_util.cc, kRestrictedPorts); Firefox's list
# is a subset of it.
BROWSER_BLOCKED_PORTS = frozenset(
    {1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95}
    | {101, 102, 103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143}
    | {161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554}
    | {556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045}
    | {4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080}
)


def free_port() -> int:
    """A port nothing listens on now, outside the browsers' blocked list."""
    held: list[socket.socket] = []
    try:
        while True:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            if port not in BROWSER_BLOCKED_PORTS:
                s.close()
                return port
            held.append(s)  # kept bound so the kernel hands out another one
    finally:
        for s in held:
            s.close()
