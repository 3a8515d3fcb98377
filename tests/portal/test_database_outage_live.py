"""On the served stack: while its database does not answer, the API answers 503 with
Retry-After in its error format and pages a short 503 page, never a 500; once the
database is back, both work again (issue #30).

The stack reaches the test database through a TCP relay of this test's own; the outage
is the relay resetting every connection and refusing new ones, as a killed postmaster
does. The machine's shared PostgreSQL, which other tests use, is never stopped."""

import json
import socket
import threading
import urllib.error
import urllib.request

import pytest
from django.db import connection
from django.test import Client

from identity.tokens import ApiToken
from tests import polling
from tests.livestack import LiveStack, database_url, free_port

pytestmark = pytest.mark.django_db(transaction=True)


class Relay:
    """127.0.0.1:port -> the database server; down() resets and refuses, up() relays again."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.port = free_port()
        self.listener: socket.socket | None = None
        self.conns: list[socket.socket] = []
        self.relayed = 0  # connections relayed so far
        self.lock = threading.Lock()

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
            listener.close()
        with self.lock:
            conns, self.conns = self.conns, []
        for conn in conns:
            try:  # a reset, not a polite close: the server is gone
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                conn.close()
            except OSError:
                pass

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns += [client, server]
                self.relayed += 1
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.close()
            except OSError:
                pass


def call(url: str, headers: dict, data: bytes | None = None):
    """(status, headers (case-insensitive), body)."""
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


@pytest.fixture
def relayed_stack(tmp_path, owner):
    settings = connection.settings_dict
    if not settings["ENGINE"].endswith("postgresql"):
        pytest.skip("needs the PostgreSQL test database")
    relay = Relay(settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432))
    relay.up()
    url = database_url().replace(
        f"@{settings['HOST']}:{settings['PORT']}/", f"@127.0.0.1:{relay.port}/"
    )
    stack = LiveStack(tmp_path, env={"DATABASE_URL": url}).start()
    yield stack, relay
    relay.down()
    stack.stop()


def test_the_served_api_and_pages_answer_503_while_the_database_is_down(relayed_stack, owner):
    stack, relay = relayed_stack
    _, token = ApiToken.issue(owner, "live")
    api = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    browser = Client()
    browser.force_login(owner)  # a session row the served pages read
    page = {"Cookie": f"sessionid={browser.cookies['sessionid'].value}"}
    jobs = f"{stack.url}/api/v1/jobs/"
    assert call(jobs, api)[0] == 200
    assert call(f"{stack.url}/", page)[0] == 200
    assert relay.relayed  # the stack's database connections go through the relay

    relay.down()
    answers = [
        call(jobs, api),
        call(jobs, api, json.dumps({"container": "x", "command": "true"}).encode()),
        call(f"{stack.url}/api/v1/clusters/", api),
    ]
    for status, headers, body in answers:
        assert status == 503, (status, body[:300], stack.logs())
        assert headers.get("Retry-After") == "5"
        error = json.loads(body)["error"]
        assert error["status"] == 503 and error["code"] == "unavailable", error
    status, headers, body = call(f"{stack.url}/", page)
    assert status == 503 and headers.get("Retry-After") == "5", (status, body[:300])

    relay.up()
    polling.until(lambda: call(jobs, api)[0] == 200, 30, "the API to answer 200 again")
    assert call(f"{stack.url}/", page)[0] == 200
