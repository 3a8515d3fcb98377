"""The OpenSSH masters of one process (clusters/bulk.py), as bookkeeping with no
process of its own: which master serves which key (an account, who asked and what for),
when one is replaced (its login's settings changed, its certificate is about to expire,
it died), when one is closed (idle for ``PORTAL_BULK_SSH_IDLE`` seconds; the least
recently used idle one when a process holds ``PORTAL_BULK_SSH_MASTERS``), and that one
in use is never closed under its user (retired, it is closed when given back). The
clocks are parameters, so tests run it with fake ones and fake masters."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings

from clusters import ssh

EXPIRY_MARGIN = 10  # seconds before its certificate expires a master is replaced


class Full(ssh.ClusterError):
    """Every master this process may hold is in use."""


class Closable(Protocol):
    """What a registry needs of a master."""

    expires_at: float | None

    def alive(self) -> bool: ...

    def close(self) -> None: ...


@dataclass
class _Slot:
    master: Any
    config: str
    last_used: float
    busy: int = 0
    retired: bool = False  # out of the registry; closed when its last user is done


@dataclass
class Registry:
    """This process's masters by (account, who asked and what for). One in use is never
    closed under its user: retired, it is closed when given back."""

    clock: Callable[[], float] = time.monotonic  # idle times
    wall: Callable[[], float] = time.time  # certificates' expiry
    slots: OrderedDict[tuple, _Slot] = field(default_factory=OrderedDict)  # oldest use first
    lock: threading.Lock = field(default_factory=threading.Lock)

    def usable(self, slot: _Slot, config: str) -> bool:
        expires = slot.master.expires_at
        expired = expires is not None and self.wall() >= expires - EXPIRY_MARGIN
        return slot.config == config and not expired and slot.master.alive()

    @contextlib.contextmanager
    def using(self, key: tuple, config: str, start: Callable[[], Closable]) -> Iterator[Any]:
        """The master for ``key``, started by ``start()`` unless a usable one is there,
        held while the block runs."""
        slot = self._take(key, config)
        if slot is None:
            self._make_room()
            slot = _Slot(start(), config, self.clock())
            slot.busy = 1
            with self.lock:
                old = self.slots.pop(key, None)
                self.slots[key] = slot
            if old is not None:
                self._retire(old)
        broken = False
        try:
            yield slot.master
        except ssh.ClusterUnreachable:
            broken = True
            raise
        finally:
            self._give_back(key, slot, broken)

    def _take(self, key: tuple, config: str) -> _Slot | None:
        with self.lock:
            slot = self.slots.get(key)
            if slot is not None and self.usable(slot, config):
                slot.busy += 1
                slot.last_used = self.clock()
                self.slots.move_to_end(key)
                return slot
            if slot is not None:
                del self.slots[key]
        if slot is not None:
            self._retire(slot)
        return None

    def _retire(self, slot: _Slot) -> None:
        with self.lock:
            slot.retired = True
            close = slot.busy == 0
        if close:
            slot.master.close()

    def _give_back(self, key: tuple, slot: _Slot, broken: bool) -> None:
        with self.lock:
            slot.busy -= 1
            slot.last_used = self.clock()
            if broken and self.slots.get(key) is slot:
                del self.slots[key]
                slot.retired = True
            close = slot.retired and slot.busy == 0
        if close:
            slot.master.close()

    def _make_room(self) -> None:
        """Room for one more: idle masters beyond the cap closed, least recently used
        first; when every one is in use, Full."""
        limit = max(1, settings.PORTAL_BULK_SSH_MASTERS)
        with self.lock:
            idle = [k for k, s in self.slots.items() if s.busy == 0]
            excess = len(self.slots) + 1 - limit
            if excess > len(idle):
                raise Full(f"{len(self.slots)} OpenSSH masters are busy in this process")
            gone = [self.slots.pop(k) for k in idle[: max(0, excess)]]
        for slot in gone:
            self._retire(slot)

    def sweep(self) -> None:
        """Close the masters unused for PORTAL_BULK_SSH_IDLE seconds, or dead."""
        idle = settings.PORTAL_BULK_SSH_IDLE
        now = self.clock()
        with self.lock:
            gone = [
                k
                for k, s in self.slots.items()
                if s.busy == 0 and (now - s.last_used >= idle or not s.master.alive())
            ]
            slots = [self.slots.pop(k) for k in gone]
        for slot in slots:
            self._retire(slot)

    def close_all(self) -> None:
        with self.lock:
            slots = list(self.slots.values())
            self.slots.clear()
        for slot in slots:
            self._retire(slot)
