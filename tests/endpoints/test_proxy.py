"""An endpoint's route through Debian's HAProxy with the portal's configuration
(endpoints/routes.py, the be_endpoints backend): a program's API key checked on every
request and never passed on, the model server's token added, cookies dropped both
ways, a revoked key refused at once, a key's rate, server-sent events carried as they
are sent, and an endpoint that is not running handed to the portal."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from endpoints.routes import Activity, EndpointRoute, Runtime
from tests.proxystack import DOMAIN, Proxy, need_haproxy

EID = "ab" * 16
TOKEN = "guard-token-" + "y" * 20
KEY = "pe_" + "k" * 43
OTHER = "pe_" + "o" * 43


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ModelServer(BaseHTTPRequestHandler):
    """A stand-in model server: /invocations echoes what reached it; /stream sends one
    event, then the next only once the test has seen it."""

    protocol_version = "HTTP/1.1"
    seen = threading.Event()
    sent_at: list[float] = []

    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/broken":
            self.send_error(500)
            return
        answer = json.dumps(
            {
                "path": self.path,
                "authorization": self.headers.get("Authorization"),
                "cookie": self.headers.get("Cookie"),
                "body": body.decode(),
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Set-Cookie", "tracker=1; Path=/")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_GET(self):  # noqa: N802
        """Five events in chunked encoding (as a model server's streamed answer), each sent
        only once the test has seen the one before; when each was sent is kept."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for n in range(5):
            ModelServer.seen.clear()
            event = f"data: {n}\n\n".encode()
            ModelServer.sent_at.append(time.monotonic())
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
            ModelServer.seen.wait(10)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True


class Portal(BaseHTTPRequestHandler):
    """The portal's stand-in: answers where HAProxy sent the request."""

    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802 - HAProxy's health check of /healthz
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):  # noqa: N802
        body = json.dumps({"portal_path": self.path}).encode()
        self.send_response(503)
        self.send_header("Retry-After", "30")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def read_stream(url: str, headers: dict, on_first=lambda: True) -> bool:
    """ModelServer's /stream through ``url``: its five events in order, each passed at once
    (held back, as HAProxy sending with MSG_MORE and the kernel waiting up to 200 ms for
    more would, every one would take ~200 ms). ``on_first()`` is asked while the stream
    is open."""
    ModelServer.sent_at.clear()
    events, delays, first = [], [], False
    with httpx.stream("GET", url, headers=headers, timeout=10) as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if line.startswith("data: "):
                delays.append(time.monotonic() - ModelServer.sent_at[len(events)])
                events.append(line[6:])
                first = first or on_first()
                ModelServer.seen.set()  # the server sends the next one only now
    assert events == ["0", "1", "2", "3", "4"]
    assert sorted(delays)[2] < 0.1, delays
    return first


def serve(handler) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def proxy(tmp_path, settings):
    need_haproxy()
    portal = serve(Portal)
    data_path = Proxy(tmp_path, settings, portal=f"127.0.0.1:{portal.server_port}").start()
    yield data_path
    data_path.stop()
    portal.shutdown()


@pytest.fixture
def model():
    server = serve(ModelServer)
    yield server
    server.shutdown()


def call(proxy, path="/invocations", key: str | None = KEY, **kwargs):
    headers = {"Host": f"ep-{EID}.{DOMAIN}:{proxy.port}", **kwargs.pop("headers", {})}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(f"http://127.0.0.1:{proxy.port}{path}", headers=headers, timeout=10, **kwargs)


def test_a_key_opens_the_endpoint_and_never_reaches_the_model_server(proxy, model):
    runtime = Runtime(proxy.api)
    runtime.add(EndpointRoute(EID, "127.0.0.1", model.server_port, TOKEN, {digest(KEY): 50}))
    answer = call(proxy, json={"inputs": [[1, 2]]}, headers={"Cookie": "sessionid=portal"})
    assert answer.status_code == 200, answer.text
    seen = answer.json()
    assert seen["authorization"] == f"token {TOKEN}" and seen["cookie"] is None
    assert seen["body"] == '{"inputs":[[1,2]]}' and seen["path"] == "/invocations"
    assert "set-cookie" not in answer.headers
    # No key, another key, a key in the URL, a cookie alone: 401, with what to send.
    for refused in (
        call(proxy, key=None),
        call(proxy, key=OTHER),
        call(proxy, path=f"/invocations?api_key={KEY}", key=None),
        call(proxy, key=None, headers={"Cookie": "sessionid=portal"}),
        call(proxy, key=None, headers={"Authorization": KEY}),
    ):
        assert refused.status_code == 401
        assert refused.json()["error"]["type"] == "invalid_api_key"
        assert refused.headers["www-authenticate"] == "Bearer"
    assert runtime.state() == (
        {EID: ("127.0.0.1", model.server_port, TOKEN)},
        {EID: {digest(KEY): 50}},
    )
    # HAProxy's counters: the forwarded requests (none of the refused), a 5xx an error.
    assert call(proxy, path="/broken").status_code == 500
    seen = runtime.activity()[EID]
    assert (seen.requests, seen.errors, seen.in_flight) == (2, 1, 0)


def test_a_revoked_key_is_refused_at_once_and_a_keys_rate_holds(proxy, model):
    runtime = Runtime(proxy.api)
    runtime.add(EndpointRoute(EID, "127.0.0.1", model.server_port, TOKEN, {digest(KEY): 3}))
    codes = [call(proxy).status_code for _ in range(8)]
    assert codes[:3] == [200, 200, 200] and 429 in codes, codes
    limited = call(proxy)
    assert limited.status_code == 429 and limited.headers["retry-after"] == "1"
    # Refused attempts count too: a client that keeps trying stays refused; one that
    # waits is let through once the last second's estimate is under its rate.
    time.sleep(2.2)
    assert call(proxy).status_code == 200
    revoked = time.monotonic()
    runtime.set_grants(EID, {}, {digest(KEY): 3})
    assert call(proxy).status_code == 401
    assert time.monotonic() - revoked < 1


def test_server_sent_events_pass_as_they_are_sent_and_count_as_in_flight(proxy, model):
    """A stream still flowing is a request in flight (an idle endpoint is not stopped under
    it); a refused request is no traffic at all."""
    runtime = Runtime(proxy.api)
    runtime.add(EndpointRoute(EID, "127.0.0.1", model.server_port, TOKEN, {digest(KEY): 50}))
    assert runtime.activity() == {EID: Activity(0, None)}
    assert call(proxy, key=OTHER).status_code == 401
    assert runtime.activity() == {EID: Activity(0, None)}
    headers = {"Host": f"ep-{EID}.{DOMAIN}:{proxy.port}", "Authorization": f"Bearer {KEY}"}
    first = lambda: runtime.activity()[EID].in_flight == 1  # noqa: E731
    assert read_stream(f"http://127.0.0.1:{proxy.port}/stream", headers, first)
    seen = runtime.activity()[EID]
    assert seen.in_flight == 0 and seen.idle_seconds is not None and seen.idle_seconds <= 2


def test_an_endpoint_not_running_is_handed_to_the_portal(proxy, model):
    runtime = Runtime(proxy.api)
    answer = call(proxy, path="/v1/chat/completions", json={})
    assert answer.status_code == 503 and answer.headers["retry-after"] == "30"
    assert answer.json() == {"portal_path": f"/_portal/endpoint/{EID}/v1/chat/completions"}
    # Running, then removed: back to the portal, and the server is gone.
    runtime.add(EndpointRoute(EID, "127.0.0.1", model.server_port, TOKEN, {digest(KEY): 5}))
    assert call(proxy).status_code == 200
    runtime.remove(EID)
    assert call(proxy).status_code == 503
    assert runtime.state() == ({}, {EID: {digest(KEY): 5}})
    assert runtime.reconcile([]) == (0, 0) and runtime.state() == ({}, {})
