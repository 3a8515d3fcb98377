"""``manage.py import_runs --user NAME PATH_OR_URI...``: an administrator's import of MLflow,
W&B and TensorBoard runs into a person's jobs (tracking/imports/). A path is read as
a folder or file; ``http(s)://`` and ``sqlite:///`` name an MLflow tracking store."""

from __future__ import annotations

import json as jsonlib
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from tracking.imports import service


class Command(BaseCommand):
    help = "Import MLflow, W&B and TensorBoard runs into a person's jobs (once each)."

    def add_arguments(self, parser):
        parser.add_argument("sources", nargs="+", help="Folders, files or MLflow tracking URIs.")
        parser.add_argument("--user", required=True, help="Who the runs will belong to.")
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args, sources, user, json: bool = False, **options):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"No user named {user!r}.")
        total = service.Report()
        for source in sources:
            if source.startswith(("http://", "https://", "sqlite:///")):
                report = service.import_uri(owner, source)
            else:
                path = Path(source).absolute()
                if not path.exists():
                    raise CommandError(f"{source} does not exist.")
                report = service.import_path(owner, path)
            total.merge(report)
        if json:
            self.stdout.write(_json(total.as_dict()))
            return
        for message in total.refused:
            self.stderr.write(message)
        self.stdout.write(total.sentence())


def _json(data: dict) -> str:
    return jsonlib.dumps(data, indent=2)
