"""portal/serving.py: which handler serves a request inside the ASGI server. The views that
stream, tus bodies and chunked bodies go to Django's ASGI handler; the rest to its WSGI
handler on the thread pool, which serves them whole (here a metric upload, stored)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from django.urls import reverse

from metrics import ingest
from metrics.models import MetricPoint
from portal.serving import BUFFERED, HttpRouter, on_event_loop
from tests import factories


def scope(path: str, method: str = "GET", headers: list | None = None) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), *(headers or [])],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }


SIZED = [(b"content-length", b"2"), (b"content-type", b"application/json")]


@pytest.mark.parametrize(
    ("path", "headers", "expected"),
    [
        (reverse("files-download", args=["c", "home"]), [], True),
        (reverse("files-zip", args=["c", "home"]), [], True),
        (reverse("files-upload", args=["c", "home", "u1"]), [], True),
        (reverse("job-file-download", args=[3]), [], True),
        (reverse("job-metrics-export", args=[3]), [], True),
        ("/api/v1/jobs/3/metrics/ingest/", SIZED, False),
        ("/", [], False),
        (reverse("files-browse", args=["c", "home"]), [], False),
        ("/no/such/page/", [], False),
        # A body of unknown length: the WSGI handler would read none of it.
        ("/api/v1/jobs/3/metrics/ingest/", [(b"transfer-encoding", b"chunked")], True),
        # A tus chunk, whatever the path: streamed to its view (portal/streamed_body.py).
        ("/", [(b"content-type", b"application/offset+octet-stream")], True),
        # Larger than what is received into memory first, or a length that is no number.
        ("/api/v1/jobs/3/metrics/ingest/", [(b"content-length", b"%d" % (BUFFERED + 1))], True),
        ("/api/v1/jobs/3/metrics/ingest/", [(b"content-length", str(BUFFERED).encode())], False),
        ("/api/v1/jobs/3/metrics/ingest/", [(b"content-length", b"-1")], True),
        ("/api/v1/jobs/3/metrics/ingest/", [(b"content-length", b"1e9")], True),
    ],
)
def test_what_streams_is_served_on_the_event_loop(path, headers, expected):
    assert on_event_loop(scope(path, headers=headers)) is expected


async def _serve(app, request: dict, body: bytes) -> list[dict]:
    sent: list[dict] = []
    queue: asyncio.Queue = asyncio.Queue()
    await queue.put({"type": "http.request", "body": body, "more_body": False})

    async def receive():
        return await queue.get()

    async def send(message):
        sent.append(message)

    await asyncio.wait_for(app(request, receive, send), 30)
    return sent


@pytest.mark.django_db(transaction=True)  # the pool's threads have their own connections
def test_the_rest_is_served_whole_by_the_thread_pool(owner, cluster):
    job = factories.training_job(owner, cluster)
    token = ingest.issue_token(job)
    body = json.dumps(factories.metric_records(25)).encode()
    on_loop: list[dict] = []

    async def streaming(request, receive, send):  # stands in for the ASGI handler
        on_loop.append(request)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    router = HttpRouter(streaming, threads=2)
    served_by: list[str] = []
    real = router.threaded.app

    def wsgi(environ, start_response):  # the WSGI handler, noting the thread it ran on
        served_by.append(threading.current_thread().name)
        return real(environ, start_response)

    router.threaded.app = wsgi
    headers = [
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    url = f"/api/v1/jobs/{job.pk}/metrics/ingest/"
    sent = asyncio.run(_serve(router, scope(url, "POST", headers), body))
    assert sent[0]["status"] == 200, sent
    answer = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert answer["inserted"] == 50 and MetricPoint.objects.count() == 50
    assert served_by and served_by[0].startswith("WSGI") and not on_loop

    download = reverse("files-download", args=[cluster.name, "home"])
    sent = asyncio.run(_serve(router, scope(download), b""))
    assert sent[0]["status"] == 204 and [r["path"] for r in on_loop] == [download]
    assert len(served_by) == 1  # the download never reached the pool


def test_a_body_sent_slowly_holds_no_thread_of_the_pool():
    """The body is received whole on the event loop before a thread takes the request: a
    client that trickles (or never finishes) its body leaves the pool to everyone else."""
    served: list[bytes] = []

    def wsgi(environ, start_response):
        served.append(environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"])))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    async def streaming(request, receive, send):  # pragma: no cover - not reached here
        raise AssertionError("a small body goes to the pool")

    router = HttpRouter(streaming, threads=1)
    router.threaded.app = wsgi
    request = scope("/", "POST", [(b"content-length", b"6")])

    async def run() -> tuple[list[dict], list[dict]]:
        slow: asyncio.Queue = asyncio.Queue()
        await slow.put({"type": "http.request", "body": b"abc", "more_body": True})
        slow_sent: list[dict] = []

        async def slow_send(message):
            slow_sent.append(message)

        stalled = asyncio.create_task(router(request, slow.get, slow_send))
        await asyncio.sleep(0.2)  # half of its body came; the rest has not
        quick = await _serve(router, scope("/", "POST", [(b"content-length", b"2")]), b"hi")
        assert served == [b"hi"] and not slow_sent  # the one thread served the other
        await slow.put({"type": "http.request", "body": b"def", "more_body": False})
        await asyncio.wait_for(stalled, 10)
        return quick, slow_sent

    quick, slow_sent = asyncio.run(run())
    assert quick[0]["status"] == 200 and slow_sent[0]["status"] == 200
    assert served == [b"hi", b"abcdef"]


def test_a_client_gone_before_its_body_was_whole_reaches_no_view():
    calls: list = []
    router = HttpRouter(lambda *a: calls.append(a), threads=1)
    router.threaded.app = lambda environ, start_response: calls.append(environ)
    messages = [
        {"type": "http.request", "body": b"abc", "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive():
        return messages.pop(0)

    async def send(message):  # pragma: no cover - nothing is answered
        calls.append(message)

    asyncio.run(router(scope("/", "POST", [(b"content-length", b"6")]), receive, send))
    assert calls == []


def test_requests_on_the_pool_share_the_process_redis_connections():
    """Each request runs in a copy of the event loop's context, where Django keeps its cache
    objects: with Django's own Redis cache every request opened a new connection to Redis
    (common/cache.py). Counted by the real Redis server."""
    from django.core.cache import caches

    def wsgi(environ, start_response):  # what a throttled view does: one GET of the cache
        caches["default"].get("serving-test")
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    async def streaming(request, receive, send):  # pragma: no cover - not reached here
        raise AssertionError("a GET goes to the pool")

    router = HttpRouter(streaming, threads=2)
    router.threaded.app = wsgi
    client = caches["default"]._cache.get_client(write=True)

    def connections() -> int:
        return int(client.info("stats")["total_connections_received"])

    caches["default"].get("serving-test")  # this process's first connection
    before = connections()
    for _ in range(20):
        sent = asyncio.run(_serve(router, scope("/"), b""))
        assert sent[0]["status"] == 200
    assert connections() - before <= 2  # at most one per thread of the pool (was 20)
