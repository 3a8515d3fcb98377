from django.core.management.base import BaseCommand

from common.crypto import generate_key


class Command(BaseCommand):
    help = "Print a new key for PORTAL_ENCRYPTION_KEYS (encrypts cluster private keys at rest)."

    def handle(self, *args, **options):
        self.stdout.write(generate_key())
