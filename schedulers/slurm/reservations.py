"""Slurm's reservations (``scontrol -o show reservation``) with the partitions whose nodes
each takes (``sinfo``), for the launch form's calendar: a job that would run into a
maintenance window waits for it to end ("ReqNodeNotAvail, Reserved for maintenance").

One line per reservation of ``key=value`` words, read by key; the output is bounded and a
reservation that cannot be read is skipped."""

from __future__ import annotations

import re
from datetime import datetime

from django.utils import timezone

from clusters import ssh
from common.hostlist import expand_hostlist
from schedulers.seam import Reservation
from schedulers.slurm import parsers

READ = r"""
scontrol -o show reservation 2>/dev/null || true
echo '#partitions'
sinfo -h -o '%R|%N'
"""

MAX_BYTES = 1024 * 1024
MAX_RESERVATIONS = 200
_WORD = re.compile(r"(\w+)=(\S*)")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")


def read(conn: ssh.Connection) -> list[Reservation]:
    result = ssh.run_scheduler_command(
        conn, ["bash", "-c", READ], parsers.is_transient, max_bytes=MAX_BYTES
    )
    return parse(result.stdout)


def _time(value: str) -> datetime | None:
    moment = parsers.parse_time(value)
    if moment is None:
        return None
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


def parse(text: str) -> list[Reservation]:
    reservations, nodes_of = [], {}
    lines = text.splitlines()
    split = lines.index("#partitions") if "#partitions" in lines else len(lines)
    for line in lines[split + 1 :][:MAX_RESERVATIONS]:
        partition, _, nodes = line.partition("|")
        if _NAME.match(partition.strip()):
            nodes_of[partition.strip()] = set(expand_hostlist(nodes.strip()))
    for line in lines[:split][:MAX_RESERVATIONS]:
        words = dict(_WORD.findall(line))
        name = words.get("ReservationName", "")
        start, end = _time(words.get("StartTime", "")), _time(words.get("EndTime", ""))
        if not (_NAME.match(name) and start and end and end > start):
            continue
        flags = set(words.get("Flags", "").split(","))
        taken = set(expand_hostlist(words.get("Nodes", "")))
        named = words.get("PartitionName", "")
        partitions = {p for p, nodes in nodes_of.items() if nodes & taken or p == named}
        reservations.append(
            Reservation(
                name=name,
                start=start,
                end=end,
                maintenance="MAINT" in flags,
                partitions=frozenset(partitions),
            )
        )
    return reservations
