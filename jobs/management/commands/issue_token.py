"""Make a personal API token for a user (printed once; only its hash is kept)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from jobs.models import ApiToken


class Command(BaseCommand):
    help = "Issue a personal API token for USERNAME and print it (it cannot be shown again)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="issued by an administrator")
        parser.add_argument("--days", type=int, default=None, help="expire after this many days")

    def handle(self, username, name, days, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        if days is not None and days < 1:
            raise CommandError("--days must be at least 1.")
        row, token = ApiToken.issue(user, name, days)
        expiry = f", expires {row.expires_at:%Y-%m-%d %H:%M} UTC" if row.expires_at else ""
        self.stderr.write(f"Token '{row.name}' for {username}{expiry}:")
        self.stdout.write(token)
