"""The Celery application: workers submit, follow and cancel Slurm jobs."""

import os

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def check_signing_keys(**kwargs) -> None:
    """A worker that signs certificates itself (no PORTAL_SSH_SIGNER_SOCKET) refuses to
    start with a CA key file others could read (clusters/certs.py)."""
    from django.conf import settings

    from clusters import certs

    if not settings.PORTAL_SSH_SIGNER_SOCKET:
        certs.check_ca_files()
