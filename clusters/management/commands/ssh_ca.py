from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from clusters import certs


class Command(BaseCommand):
    help = (
        "Create the portal's SSH user CA key(s) of PORTAL_SSH_CA_KEY_FILES if missing (0600) "
        "and print their public key lines for the login nodes' TrustedUserCAKeys."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--new",
            metavar="PATH",
            help="rotation: create a new CA key at PATH (and PATH.pub) and print its line; "
            "then trust it on every login node and put it first in PORTAL_SSH_CA_KEY_FILES",
        )
        parser.add_argument(
            "--pub-out",
            metavar="FILE",
            help="also write the public key lines to FILE (for deploy/*/up.sh)",
        )

    def handle(self, *args, new=None, pub_out=None, **options):
        paths = [Path(new)] if new else [Path(p) for p in settings.PORTAL_SSH_CA_KEY_FILES]
        if not paths:
            raise CommandError(
                "PORTAL_SSH_CA_KEY_FILES is not set: name the CA key file(s) to create."
            )
        lines = []
        for path in paths:
            if certs.new_ca_file(path):
                self.stderr.write(f"created the SSH user CA {path} (keep it secret: 0600)")
            try:
                key = certs.load_ca(str(path))
            except certs.CAMissing as exc:
                raise CommandError(str(exc)) from None
            lines.append(certs.public_line(key, f"hpc-portal-user-ca:{path.name}"))
        for line in lines:
            self.stdout.write(line)
        if pub_out:
            Path(pub_out).write_text("".join(f"{line}\n" for line in lines))
