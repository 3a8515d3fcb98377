"""portal/streamed_body.py: an upload chunk's body reaches its view as it arrives, with at
most HELD bytes between the server and the view, and a cut keeps what arrived."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.http import HttpResponse
from django.test import override_settings
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from portal.streamed_body import BodyStream, StreamedBodyHandler, streamed

seen: dict = {}


@csrf_exempt
def reader(request):
    """Reads the body in pieces, noting each and when the first came."""
    pieces = []
    while piece := request.read(7):
        pieces.append(piece)
        seen["first"].set()
    seen["pieces"] = pieces
    seen["aborted"] = getattr(request._stream, "aborted", None)
    seen["done"].set()
    return HttpResponse(b"".join(pieces), content_type="text/plain")


urlpatterns = [path("chunk", reader)]


def scope(content_type: bytes) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "PATCH",
        "scheme": "http",
        "path": "/chunk",
        "raw_path": b"/chunk",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", content_type)],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }


def serve(content_type: bytes, messages) -> tuple[list[dict], list]:
    """The handler on one request whose body ``messages`` (an async generator) give."""
    seen.clear()
    seen["first"], seen["done"] = threading.Event(), threading.Event()
    sent: list[dict] = []

    async def run():
        source = messages()

        async def receive():
            try:
                return await source.__anext__()
            except StopAsyncIteration:
                await asyncio.sleep(3600)  # (no disconnect: the handler cancels this)

        async def send(message):
            sent.append(message)

        await StreamedBodyHandler()(scope(content_type), receive, send)

    with override_settings(ROOT_URLCONF=__name__, ALLOWED_HOSTS=["testserver"]):
        asyncio.run(asyncio.wait_for(run(), 20))
    return sent, seen.get("pieces", [])


def body_of(sent: list[dict]) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def test_the_view_reads_the_first_bytes_before_the_last_arrive():
    async def messages():
        yield {"type": "http.request", "body": b"x" * 10, "more_body": True}
        # The rest comes only once the view has read the first bytes: a handler that read
        # the whole body before the view would wait here until the timeout.
        came = await asyncio.to_thread(seen["first"].wait, 10)
        yield {"type": "http.request", "body": b"y" * 10 if came else b"", "more_body": False}

    sent, pieces = serve(b"application/offset+octet-stream", messages)
    assert sent[0]["status"] == 200
    assert body_of(sent) == b"x" * 10 + b"y" * 10
    assert seen["aborted"] is False


def test_other_bodies_are_read_whole_first_as_django_does():
    async def messages():
        yield {"type": "http.request", "body": b"x" * 10, "more_body": True}
        came = await asyncio.to_thread(seen["first"].wait, 0.5)
        yield {"type": "http.request", "body": b"late" if came else b"y", "more_body": False}

    sent, pieces = serve(b"application/octet-stream", messages)
    assert body_of(sent) == b"x" * 10 + b"y"
    assert seen["aborted"] is None  # Django's own spooled file


def test_a_cut_gives_the_view_what_arrived_and_says_so():
    async def messages():
        yield {"type": "http.request", "body": b"x" * 10, "more_body": True}
        yield {"type": "http.disconnect"}

    serve(b"application/offset+octet-stream; charset=x", messages)
    # (the client went: Django stops waiting for the view, whose thread runs on to its end)
    assert seen["done"].wait(10)
    assert b"".join(seen["pieces"]) == b"x" * 10
    assert seen["aborted"] is True


def test_the_view_never_has_more_than_held_bytes_waiting_for_it():
    """A slow reader: the filler waits for room instead of receiving on (the server then
    stops reading the socket), and every byte arrives once, in order."""

    async def scenario():
        stream = BodyStream(asyncio.get_running_loop(), held=1000)
        sent = [bytes([i]) * 300 for i in range(40)]
        most = 0

        async def receive():
            nonlocal most
            most = max(most, stream._held)
            piece = sent.pop(0)
            return {"type": "http.request", "body": piece, "more_body": bool(sent)}

        def slow_reader():
            out = []
            while piece := stream.read(128):
                out.append(piece)
                threading.Event().wait(0.001)
            return b"".join(out)

        filling = asyncio.create_task(stream.fill(receive))
        got = await asyncio.to_thread(slow_reader)
        await filling
        return got, most

    got, most = asyncio.run(scenario())
    assert got == b"".join(bytes([i]) * 300 for i in range(40))
    assert most <= 1000 + 300  # at most one message past the limit


@pytest.mark.parametrize(
    "header,expected",
    [
        (b"application/offset+octet-stream", True),
        (b"Application/Offset+Octet-Stream ; x=1", True),
        (b"application/octet-stream", False),
        (b"multipart/form-data; boundary=x", False),
    ],
)
def test_which_bodies_stream(header, expected):
    assert streamed({"headers": [(b"content-type", header)]}) is expected
    assert streamed({"headers": []}) is False


def test_read1_hands_on_each_piece_as_it_came():
    """What an upload reads (files.uploads._pieces): each received piece as it is, cut
    only to the size asked; b"" at the end."""

    async def scenario():
        stream = BodyStream(asyncio.get_running_loop())
        first, second = b"a" * 100, b"b" * 50
        messages = [
            {"type": "http.request", "body": first, "more_body": True},
            {"type": "http.request", "body": second, "more_body": False},
        ]

        async def receive():
            return messages.pop(0)

        await stream.fill(receive)
        got = [stream.read1(1000), stream.read1(20), stream.read1(-1), stream.read1(10)]
        return got, first

    got, first = asyncio.run(scenario())
    assert got[0] is first  # (no copy)
    assert got[1:] == [b"b" * 20, b"b" * 30, b""]
