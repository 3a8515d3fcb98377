from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from ops import backup


class Command(BaseCommand):
    help = (
        "Bring an archive made by `manage.py backup` into this portal's database, which must "
        "be empty and of the same engine; then run `manage.py migrate`."
    )

    def add_arguments(self, parser):
        parser.add_argument("archive")

    def handle(self, archive, **options):
        try:
            described = backup.restore(Path(archive))
        except backup.BackupError as exc:
            raise CommandError(str(exc)) from exc
        restored = backup.counts()
        self.stdout.write(
            f"restored {archive} (made {described['created_at']} by code {described['code']})"
        )
        for label, saved in described["counts"].items():
            now = restored.get(label)
            mark = "" if now == saved else f"  (the archive says {saved:,})"
            self.stdout.write(f"  {label}: {now:,}{mark}" if now is not None else f"  {label}: -")
        for warning in described["warnings"]:
            self.stderr.write(f"warning: {warning}")
        self.stdout.write("next: manage.py migrate (the code may be newer than the archive)")
