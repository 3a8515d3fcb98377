import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Create (or reset) the demo user. Its password is kept in PORTAL_DATA_DIR/demo-password "
        "so it stays the same across runs."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default="demo")

    def handle(self, *args, username="demo", **options):
        password_file = Path(settings.DATA_DIR) / f"{username}-password"
        if password_file.exists():
            password = password_file.read_text().strip()
        else:
            password = secrets.token_urlsafe(12)
            password_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            password_file.touch(mode=0o600)
            password_file.write_text(password + "\n")
        User = get_user_model()
        user, created = User.objects.get_or_create(username=username)
        # The demo user curates the catalog too, so it may use the admin.
        user.is_staff = True
        user.is_superuser = True
        # Its notifications go to `make mail`'s Maildir (every address lands there).
        user.email = user.email or f"{username}@localhost"
        user.set_password(password)
        user.save()
        # (Not printed here: `make demo` says its one way in once the stack answers.)
        self.stdout.write(
            f"{'Created' if created else 'Updated'} user {username!r} "
            f"(its local password in {password_file})"
        )
