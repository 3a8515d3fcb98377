"""How a download is handed to the server: under ASGI (what `make demo` serves) a piece is
read from the cluster only when the one before it has been sent, never the whole file
first; under WSGI (and Django's test client) a plain iterator."""

import asyncio

from django.test import AsyncRequestFactory, RequestFactory

from files import streaming


class Pieces:
    """A file's reads, counted: what the response pulled, and whether it was closed."""

    def __init__(self, n: int):
        self.n, self.pulled, self.closed = n, 0, False

    def __call__(self, first: int, end: int):
        try:
            for at in range(first, end, 10):
                self.pulled += 1
                yield bytes([65 + at // 10]) * min(10, end - at)
        finally:
            self.closed = True


def test_under_asgi_a_download_reads_no_further_than_it_has_sent():
    pieces = Pieces(5)
    response = streaming.ranged(AsyncRequestFactory().get("/d"), 50, 0.0, pieces, "f.bin")
    assert response.is_async and pieces.pulled == 0

    async def first_then_stop():
        body = aiter(response)
        got = await anext(body)
        pulled = pieces.pulled
        await body.aclose()
        return got, pulled

    got, pulled = asyncio.run(first_then_stop())
    assert got == b"A" * 10 and pulled == 1  # Django would have read all five first
    assert pieces.closed  # the reads (an SFTP session) end with the response


def test_under_asgi_a_range_is_served_whole_and_in_order():
    pieces = Pieces(5)
    request = AsyncRequestFactory().get("/d", headers={"Range": "bytes=15-"})
    response = streaming.ranged(request, 50, 0.0, pieces, "f.bin")

    async def everything():
        return b"".join([part async for part in response])

    assert response.status_code == 206 and response["Content-Length"] == "35"
    assert asyncio.run(everything()) == b"B" * 10 + b"C" * 10 + b"D" * 10 + b"E" * 5


def test_under_wsgi_a_download_is_a_plain_iterator():
    pieces = Pieces(5)
    response = streaming.ranged(RequestFactory().get("/d"), 50, 0.0, pieces, "f.bin")
    assert not response.is_async
    assert b"".join(response.streaming_content) == b"".join(bytes([65 + i]) * 10 for i in range(5))
