from django.core.management.base import BaseCommand

from devtools import demo_catalog


class Command(BaseCommand):
    help = "Load (or refresh) the demo container catalog. Idempotent; other images are kept."

    def handle(self, *args, **options):
        for image in demo_catalog.load():
            state = "enabled" if image.enabled else "disabled example"
            self.stdout.write(f"  {image.slug}: {image} [{image.runtime}, {state}]")
