"""Make a personal API token for a user (printed once; only its hash is kept)."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from identity import audit
from identity.tokens import ApiToken


class Command(BaseCommand):
    help = "Issue a personal API token for USERNAME and print it (it cannot be shown again)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="issued by an administrator")
        parser.add_argument(
            "--days",
            type=int,
            default=None,
            help="expire after this many days (at most, and by default, PORTAL_API_TOKEN_MAX_DAYS)",
        )
        parser.add_argument(
            "--scopes",
            default="read,submit",
            help="read, submit, admin and metrics (staff only), comma-separated",
        )

    def handle(self, username, name, days, scopes, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        if days is not None and days < 1:
            raise CommandError("--days must be at least 1.")
        try:
            row, token = ApiToken.issue(user, name, days, scopes)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        audit.token_changed(
            audit.Action.TOKEN_CREATE,
            row,
            message="issued by an administrator on the host (manage.py issue_token)",
        )
        expiry = f", expires {row.expires_at:%Y-%m-%d %H:%M} UTC" if row.expires_at else ""
        self.stderr.write(f"Token '{row.name}' for {username} ({row.scopes}){expiry}:")
        self.stdout.write(token)
