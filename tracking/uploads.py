"""An upload of runs accepted, in one place for the page and the API: within the size
bound and the person's number of unfinished imports, copied where a worker finds it, and
queued once its RunImport is committed."""

from __future__ import annotations

import shutil
from typing import IO

from django.conf import settings
from django.db import transaction

from tracking import tasks
from tracking.models import RunImport

MAX_UNFINISHED = 3


class Refused(ValueError):
    """The upload is not accepted; str() says why."""


def check_size(size: int | None) -> None:
    most = settings.PORTAL_IMPORT_MAX_UPLOAD_BYTES
    if size is not None and size > most:
        raise Refused(
            f"The upload is {size / 1e6:,.0f} MB; at most {most / 1e6:,.0f} MB may be imported "
            "at once (PORTAL_IMPORT_MAX_UPLOAD_BYTES). Import a part of the folder at a time."
        )


def accept(user, data: IO[bytes], filename: str, size: int | None) -> RunImport:
    """A RunImport of ``data`` (an archive), queued for a worker."""
    check_size(size)
    if not size:
        raise Refused("The upload is empty: send a .tar.gz, .tar or .zip of your runs.")
    unfinished = RunImport.objects.filter(
        owner=user, state__in=[RunImport.State.QUEUED, RunImport.State.RUNNING]
    ).count()
    if unfinished >= MAX_UNFINISHED:
        raise Refused(
            f"You have {unfinished} imports waiting or running; send this one when one ends."
        )
    with transaction.atomic():
        run_import = RunImport.objects.create(
            owner=user, filename=filename.replace("/", "_")[:255], size=size
        )
        with open(run_import.upload_path, "wb") as out:
            shutil.copyfileobj(data, out, 1024 * 1024)
        pk = run_import.pk
        transaction.on_commit(lambda: tasks.import_upload.delay(pk))
    return run_import
