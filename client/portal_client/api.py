"""A small, dependency-free client for the portal's REST API.

Every failure becomes a :class:`PortalError` whose message says what to do about it:
a wrong URL, a refused token, a refused request (with the portal's own field messages)."""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

USER_AGENT = "portal-client/0.1"


class PortalError(Exception):
    """A request that did not work; ``str()`` is the message for the user."""

    def __init__(self, message: str, status: int | None = None, fields: dict | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.fields = fields or {}

    def __str__(self) -> str:
        lines = [self.message]
        for name, messages in self.fields.items():
            lines += [f"  {name}: {m}" for m in messages]
        return "\n".join(lines)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect means PORTAL_URL is not the portal's own address (http vs https, a
    missing path, a login page): say so instead of following it with the token."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class Client:
    def __init__(self, url: str, token: str, *, timeout: float = 30, ca_bundle: str = ""):
        if not url:
            raise PortalError(
                "No portal address: set PORTAL_URL (e.g. https://portal.example.org) "
                "or run `portal login URL`."
            )
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise PortalError(
                f"PORTAL_URL {url!r} is not a web address; use e.g. https://portal.example.org"
            )
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        context = ssl.create_default_context(cafile=ca_bundle or None)
        self._opener = urllib.request.build_opener(
            _NoRedirect(), urllib.request.HTTPSHandler(context=context)
        )

    # --- transport -----------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict | None = None,
        body: Any = None,
        raw: bool = False,
        upload: Any = None,
        upload_size: int = 0,
    ):
        """``method`` ``/api/v1/<path>``; returns the decoded JSON (or bytes with ``raw``)."""
        if not self.token:
            raise PortalError(
                "No API token: set PORTAL_TOKEN or run `portal login`. "
                f"Create a token on your account page, {self.url}/account/"
            )
        query = urllib.parse.urlencode({k: v for k, v in (params or {}).items() if v is not None})
        target = f"{self.url}/api/v1/{path}" + (f"?{query}" if query else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            target, data=data if upload is None else upload, method=method
        )
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        request.add_header("User-Agent", USER_AGENT)
        if upload is not None:  # a file, sent as it is read
            request.add_header("Content-Type", "application/octet-stream")
            request.add_header("Content-Length", str(upload_size))
        elif data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                payload = response.read()
                content_type = response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            raise self._refused(exc, path) from None
        except urllib.error.URLError as exc:
            raise self._unreachable(exc.reason) from None
        except (TimeoutError, socket.timeout):
            raise PortalError(f"No answer from {self.url} within {self.timeout:g} s.") from None
        except (ConnectionError, OSError) as exc:
            raise self._unreachable(exc) from None
        if raw:
            return payload
        if "json" not in content_type:
            raise self._not_the_portal(200, content_type)
        try:
            return json.loads(payload)
        except ValueError:
            raise self._not_the_portal(200, content_type) from None

    def _unreachable(self, reason) -> PortalError:
        host = urllib.parse.urlsplit(self.url).netloc
        if isinstance(reason, ssl.SSLCertVerificationError):
            why = (
                f"its TLS certificate is not trusted ({reason.verify_message}); "
                "set PORTAL_CA_BUNDLE to your site's CA file"
            )
        elif isinstance(reason, ssl.SSLError):
            why = f"TLS failed ({reason}); is it http rather than https?"
        elif isinstance(reason, socket.gaierror):
            why = f"the host name {host.rsplit(':', 1)[0]!r} does not resolve"
        elif isinstance(reason, ConnectionRefusedError):
            why = "the connection was refused (nothing listens there)"
        elif isinstance(reason, (TimeoutError, socket.timeout)):
            why = f"no answer within {self.timeout:g} s"
        else:
            why = str(reason)
        return PortalError(f"Cannot reach the portal at {self.url}: {why}. Check PORTAL_URL.")

    def _not_the_portal(self, status: int, content_type: str) -> PortalError:
        return PortalError(
            f"{self.url} does not look like the portal (HTTP {status}, "
            f"{content_type or 'no content type'} where the API answers JSON). "
            "Check PORTAL_URL: it is the portal's home page address."
        )

    def _refused(self, exc: urllib.error.HTTPError, path: str) -> PortalError:
        status = exc.code
        if 300 <= status < 400:
            where = exc.headers.get("Location", "elsewhere")
            return PortalError(
                f"{self.url} redirects to {where}; set PORTAL_URL to the portal's own address.",
                status,
            )
        try:
            error = json.loads(exc.read()).get("error")
        except (ValueError, AttributeError, OSError):
            error = None
        if not isinstance(error, dict):  # not the portal's API answering
            if status == 404 or "json" not in exc.headers.get("Content-Type", ""):
                return self._not_the_portal(status, exc.headers.get("Content-Type", ""))
            error = {}
        message = error.get("message") or exc.reason
        fields = {k: v for k, v in (error.get("fields") or {}).items() if isinstance(v, list)}
        if status == 401:
            return PortalError(
                f"The portal did not accept the token: {message} "
                f"Create a new one on {self.url}/account/ and set PORTAL_TOKEN "
                "(or run `portal login`).",
                status,
            )
        if status == 404:
            return PortalError(f"Not found: {message}", status)
        if status == 429:
            wait = exc.headers.get("Retry-After")
            later = f" Try again in {wait} s." if wait else ""
            return PortalError(f"Too many requests for this token.{later}", status)
        if status >= 500:
            return PortalError(f"The portal failed (HTTP {status}): {message}", status)
        return PortalError(
            f"The portal refused the request (HTTP {status}): {message}", status, fields
        )

    # --- resources -----------------------------------------------------------------------
    def containers(self) -> list[dict]:
        return self.request("GET", "containers/")

    def apps(self) -> list[dict]:
        return self.request("GET", "apps/")

    def clusters(self) -> list[dict]:
        return self.request("GET", "clusters/")

    def jobs(self, **filters) -> dict:
        return self.request("GET", "jobs/", params=filters)

    def compare(self, **options) -> dict:
        return self.request("GET", "compare/", params=options)

    def usage(self, **filters) -> list[dict]:
        return self.request("GET", "usage/", params=filters)

    def job(self, job_id: int) -> dict:
        return self._job_request("GET", job_id, "")

    def submit(self, **fields) -> dict:
        return self.request(
            "POST", "jobs/", body={k: v for k, v in fields.items() if v is not None}
        )

    def cancel(self, job_id: int) -> dict:
        return self._job_request("POST", job_id, "cancel/")

    def shares(self, job_id: int) -> dict:
        return self._job_request("GET", job_id, "shares/")

    def share(self, job_id: int, people: list[str], project: bool, acts_as_owner: bool) -> dict:
        body = {"people": people, "project": project, "acts_as_owner": acts_as_owner}
        return self._job_request("POST", job_id, "shares/", body=body)

    def unshare(self, job_id: int, share_id: int) -> None:
        self._job_request("DELETE", job_id, f"shares/{int(share_id)}/", raw=True)

    def annotate(self, job_id: int, **change) -> dict:
        """Change a job's note or tags (notes=, tags=, add_tags=, remove_tags=)."""
        return self._job_request("PATCH", job_id, "", body=change)

    def logs(self, job_id: int, stream: str = "stdout", offset: int | None = None) -> dict:
        return self._job_request(
            "GET", job_id, "logs/", params={"stream": stream, "offset": offset}
        )

    def metrics(self, job_id: int, **params) -> dict:
        return self._job_request("GET", job_id, "metrics/", params=params)

    # --- experiments -------------------------------------------------------------------
    def create_experiment(self, spec_text: str) -> dict:
        return self.request("POST", "experiments/", body={"spec": spec_text})

    def experiments(self, **params) -> dict:
        return self.request("GET", "experiments/", params=params)

    def experiment(self, experiment_id: int, tail: str = "", method: str = "GET", **kwargs):
        return self._one("experiment", method, experiment_id, tail, **kwargs)

    # --- imports of runs (tracking/import_views.py) ------------------------------------
    def start_import(self, archive, size: int, filename: str) -> dict:
        return self.request(
            "POST", "imports/", params={"filename": filename}, upload=archive, upload_size=size
        )

    def run_import(self, import_id: int) -> dict:
        return self.request("GET", f"imports/{int(import_id)}/")

    # --- transfers (files/api.py) -----------------------------------------------------
    def ssh_keys(self) -> list[dict]:
        return self.request("GET", "ssh-keys/")

    def add_ssh_key(self, public_key: str, name: str = "") -> dict:
        return self.request("POST", "ssh-keys/", body={"public_key": public_key, "name": name})

    def remove_ssh_key(self, key_id: int) -> None:
        self.request("DELETE", f"ssh-keys/{int(key_id)}/", raw=True)

    def ssh_certificate(self, job_id: int, **fields) -> dict:
        """A certificate for one of your keys and the way into your running job."""
        return self._job_request("POST", job_id, "ssh/", body=fields)

    def remotes(self) -> list[dict]:
        return self.request("GET", "remotes/")

    def transfers(self) -> dict:
        return self.request("GET", "transfers/")

    def start_transfer(self, **fields) -> dict:
        return self.request("POST", "transfers/", body=fields)

    def transfer(self, transfer_id: int, tail: str = "", method: str = "GET", **kwargs):
        return self._one("transfer", method, transfer_id, tail, **kwargs)

    def _job_request(self, method: str, job_id: int, tail: str, **kwargs):
        return self._one("job", method, job_id, tail, **kwargs)

    def _one(self, noun: str, method: str, item_id: int, tail: str, **kwargs):
        """A request about one job, experiment or transfer; a 404 says which is missing."""
        try:
            return self.request(method, f"{noun}s/{int(item_id)}/{tail}", **kwargs)
        except PortalError as exc:
            if exc.status == 404:
                raise PortalError(
                    f"No {noun} {item_id}: it does not exist or is not yours.", 404
                ) from None
            raise
