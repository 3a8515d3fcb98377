"""What every command shares: the output (a table or the API's JSON), dates and
states as people read them, and the arguments several commands take."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime

from portal_client.api import PortalError

EPILOG = """\
configuration:
  PORTAL_URL, PORTAL_TOKEN (and PORTAL_CA_BUNDLE for a site CA) or the file
  ~/.config/portal/config.toml written by `portal login`. Tokens are made on the
  portal's Account page.

exit status:
  0 success; 1 the portal refused or could not be reached (the message says why);
  2 bad usage. With `submit --wait`: the job's exit code; 124 if it ran out of time,
  143 if it was cancelled, 1 if it failed without one or could not be submitted.
"""


def when(value: str | None) -> str:
    if not value:
        return "-"
    try:
        return (
            datetime.fromisoformat(value.replace("Z", "+00:00"))
            .astimezone()
            .strftime("%Y-%m-%d %H:%M")
        )
    except ValueError:
        return value


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), *(line(r) for r in rows)])


def state(job: dict) -> str:
    label = job.get("state_label") or job["state"]
    if job["state"] == "pending" and job.get("pending_reason"):
        place = f"; #{job['queue_position']} in the queue" if job.get("queue_position") else ""
        label += f" ({job['pending_reason']}{place})"
    return label


def says(job: dict, field: str) -> bool:
    """A yes/no the portal sends with every job (is_final, has_session): the state
    vocabulary stays on the server."""
    if field not in job:
        raise PortalError(f"This portal does not send '{field}': it is older than this client.")
    return bool(job[field])


class Output:
    def __init__(self, as_json: bool):
        self.as_json = as_json

    def data(self, value, text: str) -> None:
        print(json.dumps(value, indent=2) if self.as_json else text, flush=True)

    def rows(self, value, rows: list[list[str]], header: list[str], empty: str) -> None:
        """``value`` as JSON, or ``rows`` as a table (``empty`` when there are none)."""
        self.data(value, table(rows, header) if rows else empty)

    @staticmethod
    def note(text: str) -> None:
        print(text, file=sys.stderr, flush=True)


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def follow_flags(parser: argparse.ArgumentParser, interval: float) -> None:
    """--wait (follow it to its end), looking every ``interval`` seconds."""
    parser.add_argument("--wait", "-w", action="store_true", help="follow it to its end")
    parser.add_argument("--interval", type=float, default=interval, help=argparse.SUPPRESS)


def job_id(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a job id (a number, see `portal jobs`)")
    return int(text)
