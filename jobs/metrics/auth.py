"""The in-job client's credential: the job's own metrics token (not a user's)."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from jobs.metrics import ingest
from jobs.models import Job


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
        job = Job.objects.filter(pk=pk).first()
        if job is None or not ingest.token_matches(job, token.strip()):
            raise exceptions.PermissionDenied(f"This token is not valid for job {pk}.")
        return AnonymousUser(), job

    def authenticate_header(self, request):
        return 'Bearer realm="job"'


class JobTokenScheme(OpenApiAuthenticationExtension):
    target_class = "jobs.metrics.auth.JobTokenAuthentication"
    name = "jobToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "The job's metrics token (in the job's work directory).",
        }
