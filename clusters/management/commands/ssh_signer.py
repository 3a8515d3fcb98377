"""`manage.py ssh_signer --socket PATH`: the SSH certificate signer (clusters/signer.py),
the one process given PORTAL_SSH_CA_KEY_FILES; web and worker processes ask it through
PORTAL_SSH_SIGNER_SOCKET."""

from __future__ import annotations

import signal
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from clusters import certs, signer


class Command(BaseCommand):
    help = (
        "Serve SSH certificates to the portal's web and worker processes over a Unix socket; "
        "the only process that reads the CA key (PORTAL_SSH_CA_KEY_FILES)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--socket", required=True, metavar="PATH", help="where to listen")

    def handle(self, *args, socket: str, **options):
        if not settings.PORTAL_SSH_CA_KEY_FILES:
            raise CommandError("PORTAL_SSH_CA_KEY_FILES is not set: the signer has no CA key.")
        try:
            for path in settings.PORTAL_SSH_CA_KEY_FILES:
                certs.load_ca(path)  # each readable, ours alone, and a key
        except certs.CAMissing as exc:
            raise CommandError(str(exc)) from None
        server = signer.Server(socket)
        signal.signal(signal.SIGTERM, _stop)
        self.stdout.write(f"ssh_signer: serving on {socket} (uids {sorted(server.uids)})")
        self.stdout.flush()
        try:
            server.serve_forever(poll_interval=0.5)
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
            Path(socket).unlink(missing_ok=True)


def _stop(signum, frame):
    raise KeyboardInterrupt  # out of serve_forever, through the finally above
