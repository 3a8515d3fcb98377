"""Request bodies are bounded before they land (portal/body_limits.py), on the real web
server (gunicorn with the uvicorn worker, as `make demo` runs it).

Before: Django's ASGI handler received any body past 1 MiB whole, spooled to a temporary
file, before authentication: a chunked POST without a cookie filled the web host's
temporary space for as long as the client sent."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests import polling
from tests.livestack import LiveStack, _answers

pytestmark = pytest.mark.django_db(transaction=True)

MIB = 1024 * 1024
PIECE = b"x" * MIB


@pytest.fixture(scope="module")
def web(tmp_path_factory, django_db_setup):
    """One web process with its own temporary folder."""
    tmp = tmp_path_factory.mktemp("bodies")
    spool = tmp / "spool"
    spool.mkdir()
    stack = LiveStack(tmp, env={"TMPDIR": str(spool)})
    stack._collectstatic()
    stack._spawn_web("web", stack.port)
    try:
        polling.until(lambda: _answers(f"{stack.url}/accounts/login/"), 60, "the web server")
        yield stack, spool
    finally:
        stack.stop()


def spooled_bytes(spool: Path) -> int:
    """Bytes in files the web processes hold open in ``spool`` (unlinked ones too: Django's
    temporary files are unnamed)."""
    total = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith(str(spool)):
                    total += os.stat(fd).st_size
        except OSError:
            continue
    return total


def send_chunked(url: str, path: str, spool: Path, *, cookie: str = "", most: int = 2048):
    """POST ``most`` MiB chunked to ``path`` (2 GB by default) until the server answers;
    returns (status, MiB sent, the largest spool seen)."""
    host, port = url.rsplit("/", 1)[-1].split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
        "Content-Type: application/octet-stream\r\n"
        + (f"Cookie: {cookie}\r\n" if cookie else "")
        + "\r\n"
    )
    sock.sendall(head.encode())
    sent, most_spooled = 0, 0
    sock.setblocking(False)
    answer = b""
    try:
        while sent < most:
            try:
                answer += sock.recv(65536)
            except BlockingIOError:
                pass
            if answer:
                break
            try:
                sock.settimeout(5)
                sock.sendall(b"%x\r\n" % len(PIECE) + PIECE + b"\r\n")
                sock.setblocking(False)
            except OSError:
                break  # the server closed the connection
            sent += 1
            most_spooled = max(most_spooled, spooled_bytes(spool))
            assert most_spooled == 0, f"{most_spooled} bytes spooled after {sent} MiB"
        sock.settimeout(10)
        deadline = time.monotonic() + 10
        while b"\r\n" not in answer and time.monotonic() < deadline:
            try:
                piece = sock.recv(65536)
            except OSError:
                break
            if not piece:
                break
            answer += piece
    finally:
        sock.close()
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else None
    return status, sent, most_spooled


@pytest.mark.parametrize("path", ["/api/v1/imports/", "/imports/", "/api/v1/jobs/"])
def test_a_2gb_chunked_post_without_a_cookie_leaves_the_temporary_space_unchanged(web, path):
    stack, spool = web
    status, sent, spooled = send_chunked(stack.url, path, spool)
    assert status == 413 and spooled == 0
    assert sent <= settings.PORTAL_BODY_MAX_BYTES // MIB + 8, sent
    assert spooled_bytes(spool) == 0 and not list(spool.iterdir())


def test_a_declared_length_over_the_limit_is_refused_unread(web):
    stack, _ = web
    sock = socket.create_connection(("127.0.0.1", stack.port), timeout=10)
    sock.sendall(
        b"POST /api/v1/imports/ HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2000000000\r\n"
        b"Content-Type: application/gzip\r\n\r\n"
    )
    answer = b""
    while piece := sock.recv(65536):  # (the server closes after its answer)
        answer += piece
    sock.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"larger than this address takes" in answer


def test_a_signed_in_person_sends_an_archive_larger_than_the_default(web, owner):
    """The route's own limit (PORTAL_IMPORT_MAX_UPLOAD_BYTES) for a live API token; a
    token that is not one is held to the default."""
    import httpx

    stack, _ = web
    from identity.tokens import ApiToken

    _, token = ApiToken.issue(owner, "bodies", scopes="read,submit")
    body = b"\0" * (4 * MIB)  # over the default 2.5 MiB, no archive at all
    url = f"{stack.url}/api/v1/imports/?filename=runs.tar.gz"
    headers = {"Content-Type": "application/gzip"}
    refused = httpx.post(url, content=body, headers={**headers, "Authorization": "Bearer pp_x"})
    assert refused.status_code == 413
    taken = httpx.post(url, content=body, headers={**headers, "Authorization": f"Bearer {token}"})
    assert taken.status_code != 413, taken.text
