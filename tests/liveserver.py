"""Django's live test server, taught to read chunked request bodies.

The live server (pytest-django's ``live_server``: Django's LiveServerThread on wsgiref) knows
only Content-Length bodies. A request sent with ``Transfer-Encoding: chunked`` reaches the
view with an empty body, and its chunks stay unread on the keep-alive connection: the server
then reads them as the next request line ("0" for an empty body), answers that "HTTP/0.9
request" with a bare ``<!DOCTYPE HTML>`` error page (no status line) and closes. The client's
next request on that connection reads the page where a status line belongs: an aborted
connection. schemathesis sends such requests (requests does, for a form field whose value is
an empty list: ``notes=[]`` encodes to an empty body of unknown length). The portal itself runs
under gunicorn and uvicorn, which read chunked bodies; here the test server does too.
"""

from __future__ import annotations

import io

import pytest
from django.core.servers import basehttp


def read_chunked(stream) -> bytes:
    """The body of a chunked request from ``stream``, its trailers read and dropped."""
    body = bytearray()
    while True:
        size_line = stream.readline(65537)
        if not size_line:
            raise ConnectionError("the client closed the connection inside a chunked body")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            break
        body += stream.read(size)
        stream.readline(65537)  # the CRLF after the chunk
    while stream.readline(65537) not in (b"\r\n", b"\n", b""):
        pass  # trailer fields
    return bytes(body)


@pytest.fixture
def chunked_request_bodies(monkeypatch):
    """While the test runs, the live server reads chunked request bodies as gunicorn does:
    the view gets the whole body and the connection stays in step with the client."""
    handler = basehttp.WSGIRequestHandler
    parse_request = handler.parse_request
    handle_one_request = handler.handle_one_request

    def parse_dechunked(self) -> bool:
        if not parse_request(self):
            return False
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = read_chunked(self.rfile)
            del self.headers["Transfer-Encoding"]
            del self.headers["Content-Length"]
            self.headers["Content-Length"] = str(len(body))
            self.rfile = io.BytesIO(body)  # the request's body; the connection's comes back
        return True

    def handle_keeping_the_connection(self) -> None:
        connection = self.rfile
        try:
            handle_one_request(self)
        finally:
            self.rfile = connection

    monkeypatch.setattr(handler, "parse_request", parse_dechunked)
    monkeypatch.setattr(handler, "handle_one_request", handle_keeping_the_connection)
