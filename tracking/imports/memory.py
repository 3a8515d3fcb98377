"""An import runs under a memory limit: what a crafted archive makes a reader allocate
fails that import (MemoryError), never the worker or its neighbours.

The limit is on the worker process's address space (RLIMIT_AS), lowered for the length of
one import to what the process holds already plus PORTAL_IMPORT_MEMORY_MB, and put back
after. Only the soft limit moves, so it can always be put back. Linux only (/proc): other
systems import without it.
"""

from __future__ import annotations

import resource
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def address_space() -> int | None:
    """This process's address space now (bytes), or None where /proc does not tell."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


@contextmanager
def limited(extra_bytes: int) -> Iterator[None]:
    """Allocations past ``extra_bytes`` more than now raise MemoryError inside."""
    now = address_space()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if now is None:
        yield
        return
    limit = now + extra_bytes
    for bound in (soft, hard):
        if bound != resource.RLIM_INFINITY:
            limit = min(limit, bound)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
