"""The in-job client's credential: the job's own metrics token (not a user's)."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from django.db import connection
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from jobs.models import Job
from metrics import ingest


class JobTokenAuthentication(authentication.BaseAuthentication):
    """The per-job metrics token of the in-job client (not a user credential).

    ``request.auth`` becomes the Job the token was issued for. An unknown job and a wrong
    token get the same answer, so job ids cannot be probed this way."""

    def authenticate(self, request):
        scheme, _, token = (
            authentication.get_authorization_header(request).decode(errors="replace").partition(" ")
        )
        if scheme.lower() != "bearer" or not token.strip():
            return None
        pk = request.parser_context["kwargs"].get("pk")
        job = job_for_upload(pk)
        if job is None or not ingest.token_matches(job, token.strip()):
            raise exceptions.PermissionDenied(f"This token is not valid for job {pk}.")
        return AnonymousUser(), job

    def authenticate_header(self, request):
        return 'Bearer realm="job"'


# What an upload reads of its job; the rest of the row loads only if a record needs it (an
# annotation: pm.tag(), pm.params()).
UPLOAD_FIELDS = [
    f
    for f in Job._meta.concrete_fields
    if f.attname in {"id", "uid", "state", "metrics_token_hash"}
]


def job_for_upload(pk: int) -> Job | None:
    """The job ``pk`` with the fields an upload reads, or None. One plain SELECT: building
    the ORM's query of the whole row, ordered, was a quarter of an upload's Python time
    under bench/load_live.py's ingest (py-spy, GIL samples)."""
    if not 0 < int(pk) < 2**63:  # no such id: the ORM answers so, plain SQL would raise
        return None
    columns = ", ".join(connection.ops.quote_name(str(f.column)) for f in UPLOAD_FIELDS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns} FROM {Job._meta.db_table} WHERE id = %s",  # noqa: S608
            [int(pk)],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    return Job.from_db(connection.alias, [f.attname for f in UPLOAD_FIELDS], row)


class JobTokenScheme(OpenApiAuthenticationExtension):
    target_class = "metrics.auth.JobTokenAuthentication"
    name = "jobToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "The job's metrics token (in the job's work directory).",
        }
