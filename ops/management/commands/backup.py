from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from ops import backup


class Command(BaseCommand):
    help = (
        "Write one archive of the portal's database (pg_dump's custom format, or SQLite's "
        "online backup) with a manifest of what it holds; `manage.py restore` brings it back."
    )

    def add_arguments(self, parser):
        parser.add_argument("archive", help="the file to write (made 0600; replaced whole)")

    def handle(self, archive, **options):
        try:
            described = backup.backup(Path(archive))
        except backup.BackupError as exc:
            raise CommandError(str(exc)) from exc
        rows = ", ".join(
            f"{n:,} {label.split('.')[-1]}" for label, n in described["counts"].items()
        )
        self.stdout.write(f"{archive}: {described['engine']} database, code {described['code']}")
        self.stdout.write(f"  {rows}")
