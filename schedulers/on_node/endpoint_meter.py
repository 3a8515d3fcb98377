"""The endpoint meter: between a model endpoint's session guard and its model server, it
times what the proxy cannot see: each streamed answer's first token and its tokens a
second. Standard library only (Python 3.8+): it runs with the image's python3.

    python3 -m endpoint_meter --port 8123 -- transformers serve --port @PORT@ ... MODEL
    python3 -m endpoint_meter --port 8123 --upstream 127.0.0.1:9000

It listens on 127.0.0.1:--port, starts the command (``@PORT@``: a free loopback port it
chose for the server) and carries each HTTP/1.1 request to the server and its answer
back, unchanged. An answer of type ``text/event-stream`` (OpenAI's streamed completions)
is read as it passes: its events are counted, and one whose ``choices[0]`` has text
(``delta.content`` or ``text``) is a token. Every PORTAL_ENDPOINT_METER_INTERVAL seconds
(15) with requests, it logs with portal_metrics (beside it on PYTHONPATH), under the
job's metrics: ``endpoint/requests`` (so far), and over the interval
``endpoint/ttft_ms`` and ``endpoint/ttft_p95_ms`` (request to first token),
``endpoint/latency_ms`` (request to the answer's end, p50) and
``endpoint/tokens_per_second`` (tokens after the first over the time they took, all
streams of the interval together).

Bounds: a head over HEAD_MAX bytes or an event line over LINE_MAX is passed on but not
read; at most CONNECTIONS_MAX connections at once. A WebSocket or other upgrade is piped
as it is. The meter ends with the server (its exit status), and stops it (SIGTERM) when
it is stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time

HEAD_MAX = 64 * 1024
LINE_MAX = 64 * 1024
CHUNK = 64 * 1024
CONNECTIONS_MAX = 512
BAD_GATEWAY = (
    b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: 25\r\n"
    b"Connection: close\r\n\r\nthe model server is not up"
)


class Events:
    """An event stream's body, fed as it passes: tokens counted, the first one timed."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.first: float | None = None
        self.last: float | None = None
        self.tokens = 0
        self._line = b""
        self._skipping = False

    def passing(self, data: bytes) -> None:
        self.feed(data, time.monotonic())

    def feed(self, data: bytes, now: float) -> None:
        lines = (self._line + data).split(b"\n")
        self._line = lines.pop()
        if len(self._line) > LINE_MAX:
            self._line, self._skipping = b"", True
        for line in lines:
            if self._skipping:
                self._skipping = False
                continue
            if self._is_token(line.rstrip(b"\r")):
                self.tokens += 1
                self.last = now
                if self.first is None:
                    self.first = now

    @staticmethod
    def _is_token(line: bytes) -> bool:
        if not line.startswith(b"data:"):
            return False
        payload = line[5:].strip()
        if not payload or payload == b"[DONE]":
            return False
        try:
            event = json.loads(payload)
            choice = event["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            return False
        if not isinstance(choice, dict):
            return False
        delta = choice.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
        return isinstance(text, str) and text != ""


class Tally:
    """What the meter saw since its last report."""

    def __init__(self) -> None:
        self.requests = 0
        self.reset()

    def reset(self) -> None:
        self.ttft: list[float] = []
        self.latency: list[float] = []
        self.tokens = 0
        self.token_seconds = 0.0
        self.seen = 0

    def add(self, started: float, ended: float, events: Events | None) -> None:
        self.requests += 1
        self.seen += 1
        self.latency.append(ended - started)
        if events is not None and events.first is not None:
            self.ttft.append(events.first - started)
            if events.tokens > 1 and events.last is not None and events.last > events.first:
                self.tokens += events.tokens - 1
                self.token_seconds += events.last - events.first

    def report(self) -> dict:
        values: dict = {"endpoint/requests": self.requests}
        if self.latency:
            values["endpoint/latency_ms"] = _quantile(self.latency, 0.5) * 1000
        if self.ttft:
            values["endpoint/ttft_ms"] = _quantile(self.ttft, 0.5) * 1000
            values["endpoint/ttft_p95_ms"] = _quantile(self.ttft, 0.95) * 1000
        if self.token_seconds > 0:
            values["endpoint/tokens_per_second"] = self.tokens / self.token_seconds
        return values


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _headers(head: bytes) -> tuple[str, dict[str, str]]:
    """(first line, lower-cased headers) of a head; repeated headers joined with ','."""
    lines = head.decode("latin-1").split("\r\n")
    found: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            key = name.strip().lower()
            found[key] = f"{found[key]},{value.strip()}" if key in found else value.strip()
    return lines[0], found


async def _head(reader: asyncio.StreamReader) -> bytes | None:
    """A message's head (through its blank line), or None at the end of the connection."""
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    except asyncio.LimitOverrunError:
        raise ConnectionError("a head over HEAD_MAX bytes") from None


async def _body(reader, writer, headers: dict[str, str], on_data=None, to_end=False) -> bool:
    """Copy a message's body (Content-Length, chunked, or until the end when ``to_end``);
    ``on_data(bytes)`` sees its payload. False when the connection must close after."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readuntil(b"\r\n")
            writer.write(size_line)
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers, then the blank line
                    line = await reader.readuntil(b"\r\n")
                    writer.write(line)
                    if line == b"\r\n":
                        break
                await writer.drain()
                return True
            await _copy(reader, writer, size, on_data)
            writer.write(await reader.readexactly(2))
            await writer.drain()
    length = headers.get("content-length")
    if length is not None:
        await _copy(reader, writer, int(length.split(",")[0]), on_data)
        return True
    if to_end:
        await _copy(reader, writer, None, on_data)
        return False
    return True


async def _copy(reader, writer, left: int | None, on_data=None) -> None:
    """``left`` bytes from ``reader`` to ``writer`` (None: until the end), each piece shown
    to ``on_data``; a body that ends before its length is an error."""
    while left is None or left > 0:
        data = await reader.read(CHUNK if left is None else min(left, CHUNK))
        if not data:
            if left is None:
                return
            raise ConnectionError("a body cut short")
        if left is not None:
            left -= len(data)
        writer.write(data)
        if on_data:
            on_data(data)
        await writer.drain()


async def _pipe(reader, writer) -> None:
    try:
        await _copy(reader, writer, None)
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


class Meter:
    def __init__(self, upstream: tuple[str, int], tally: Tally) -> None:
        self.upstream = upstream
        self.tally = tally
        self.open = 0

    async def handle(self, client_r, client_w) -> None:
        if self.open >= CONNECTIONS_MAX:
            client_w.close()
            return
        self.open += 1
        server_w = None
        try:
            try:
                server_r, server_w = await asyncio.open_connection(*self.upstream, limit=HEAD_MAX)
            except OSError:
                client_w.write(BAD_GATEWAY)
                await client_w.drain()
                return
            await self._exchanges(client_r, client_w, server_r, server_w)
        except (ConnectionError, OSError, ValueError, asyncio.IncompleteReadError):
            pass
        finally:
            self.open -= 1
            client_w.close()
            if server_w is not None:
                server_w.close()

    async def _exchanges(self, client_r, client_w, server_r, server_w) -> None:
        while True:
            head = await _head(client_r)
            if head is None:
                return
            started = time.monotonic()
            line, headers = _headers(head)
            method = line.split(" ", 1)[0].upper()
            server_w.write(head)
            if "upgrade" in headers.get("connection", "").lower():
                await server_w.drain()
                await asyncio.gather(_pipe(client_r, server_w), _pipe(server_r, client_w))
                return
            await _body(client_r, server_w, headers)
            await server_w.drain()
            while True:  # interim answers (100 Continue) first
                answer = await _head(server_r)
                if answer is None:
                    return
                client_w.write(answer)
                status_line, answer_headers = _headers(answer)
                status = int(status_line.split(" ")[1]) if " " in status_line else 0
                if not 100 <= status < 200 or status == 101:
                    break
            await client_w.drain()
            if status == 101:
                await asyncio.gather(_pipe(client_r, server_w), _pipe(server_r, client_w))
                return
            events = None
            if "text/event-stream" in answer_headers.get("content-type", "").lower():
                events = Events(started)
            on_data = events.passing if events is not None else None
            keep = True
            if method != "HEAD" and status not in (204, 304):
                keep = await _body(server_r, client_w, answer_headers, on_data, to_end=True)
            await client_w.drain()
            self.tally.add(started, time.monotonic(), events)
            closing = "close" in answer_headers.get("connection", "").lower()
            if not keep or closing or "close" in headers.get("connection", "").lower():
                return


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _report_every(tally: Tally, seconds: float) -> None:
    import portal_metrics  # type: ignore[import-not-found]  # noqa: PLC0415 - beside it in lib/

    step = 0
    while True:
        await asyncio.sleep(seconds)
        if tally.seen:
            portal_metrics.log(step=step, **tally.report())
            portal_metrics.flush()
            tally.reset()
            step += 1


async def serve(args: argparse.Namespace, command: list[str]) -> int:
    tally = Tally()
    child = None
    if command:
        inner = _free_port()
        argv = [word.replace("@PORT@", str(inner)) for word in command]
        child = subprocess.Popen(argv)  # noqa: S603 - the app's own words, as the guard's
        upstream = ("127.0.0.1", inner)
    else:
        host, _, port = args.upstream.rpartition(":")
        upstream = (host, int(port))
    meter = Meter(upstream, tally)
    server = await asyncio.start_server(meter.handle, "127.0.0.1", args.port, limit=HEAD_MAX)
    interval = float(os.environ.get("PORTAL_ENDPOINT_METER_INTERVAL", "15") or 15)
    reporting = asyncio.ensure_future(_report_every(tally, interval))
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped.set)
    try:
        while not stopped.is_set():
            if child is not None and child.poll() is not None:
                return child.returncode
            try:
                await asyncio.wait_for(stopped.wait(), 0.5)
            except asyncio.TimeoutError:  # noqa: UP041 - not TimeoutError before 3.11
                pass
        return 0
    finally:
        reporting.cancel()
        server.close()
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(5)  # (inside the guard's 10 s before it kills the meter)
            except subprocess.TimeoutExpired:
                child.kill()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1 :]
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", help="host:port of a server already running")
    args = parser.parse_args(argv)
    if bool(command) == bool(args.upstream):
        parser.error("give the server's command after --, or --upstream")
    return asyncio.run(serve(args, command))


if __name__ == "__main__":
    sys.exit(main())
