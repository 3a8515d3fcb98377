"""The session guard: the only door to an app that has no credential of its own.

An app the portal serves (VS Code, a centre's own apps) listens where only its owner can
reach it: a Unix socket in the job's private work directory, or else a port on the
node's loopback. This guard listens on the session's port, which the portal's HAProxy
reaches, and lets a connection through only when its first request carries the session's
secret as HAProxy sends it (``Authorization: token <secret>``); the header is removed
before the app sees the request. Everything after that first request on the connection
(keep-alive requests, a websocket's frames) is piped both ways unchanged: only HAProxy,
which adds the header to every request it forwards, ever got past the check.

What is refused, with a 403 and nothing sent on: a missing, wrong or repeated
Authorization header, a folded header line, a request head over HEAD_MAX bytes or not
complete within HEAD_SECONDS. At most CONNECTIONS_MAX connections at once. The secret is
read from the environment (PORTAL_SESSION_TOKEN), never from the command line.

Standard library only (Python 3.8+): it runs with the node's python3.

    python3 session_guard.py --port 8888 --upstream unix:/path/app.sock
    python3 session_guard.py --port 8888 --upstream 127.0.0.1:9000
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import os
import sys

HEAD_MAX = 64 * 1024
HEAD_SECONDS = 30.0
CONNECTIONS_MAX = 512
CHUNK = 64 * 1024
FORBIDDEN = (
    b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n"
    b"Connection: close\r\n\r\nforbidden\n"
)
BAD_GATEWAY = (
    b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: 24\r\n"
    b"Connection: close\r\n\r\nthe app is not ready yet"
)


def checked_head(head: bytes, expected: bytes) -> bytes | None:
    """The request head without its Authorization header when that header is exactly
    ``expected`` (once, unfolded); None to refuse."""
    lines = head.split(b"\r\n")
    kept = [lines[0]]
    found: list[bytes] = []
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t"):
            return None  # obsolete line folding: a header hidden in another
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"authorization":
            found.append(value.strip())
            continue
        kept.append(line)
    if len(found) != 1 or not hmac.compare_digest(found[0], expected):
        return None
    return b"\r\n".join(kept)


async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await source.read(CHUNK)
            if not data:
                break
            sink.write(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        sink.close()


class Guard:
    def __init__(self, upstream: str, secret: str, head_seconds: float = HEAD_SECONDS):
        self.upstream = upstream
        self.expected = b"token " + secret.encode()
        self.head_seconds = head_seconds
        self.open = 0

    async def connect(self):
        if self.upstream.startswith("unix:"):
            return await asyncio.open_unix_connection(self.upstream[5:])
        host, _, port = self.upstream.rpartition(":")
        return await asyncio.open_connection(host or "127.0.0.1", int(port))

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.open >= CONNECTIONS_MAX:
            writer.close()
            return
        self.open += 1
        try:
            await self._serve(reader, writer)
        finally:
            self.open -= 1

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.head_seconds)
        # (asyncio.TimeoutError: not the builtin before Python 3.11, which nodes may run)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError):  # noqa: UP041
            writer.close()
            return
        except (ConnectionError, OSError):
            writer.close()
            return
        forwarded = checked_head(head, self.expected)
        if forwarded is None:
            writer.write(FORBIDDEN)
            await _drain_and_close(writer)
            return
        try:
            up_reader, up_writer = await self.connect()
        except (ConnectionError, OSError):
            writer.write(BAD_GATEWAY)
            await _drain_and_close(writer)
            return
        up_writer.write(forwarded)
        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))


async def _drain_and_close(writer: asyncio.StreamWriter) -> None:
    try:
        await writer.drain()
    except (ConnectionError, OSError):
        pass
    writer.close()


async def serve(port: int, guard: Guard, host: str = "0.0.0.0", ready=None) -> None:
    server = await asyncio.start_server(guard.handle, host, port, limit=HEAD_MAX)
    if ready is not None:
        ready(server)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Let only the portal's proxy reach an app.")
    parser.add_argument("--port", type=int, required=True, help="the session's port")
    parser.add_argument("--upstream", required=True, help="unix:/path or HOST:PORT of the app")
    parser.add_argument("--host", default="0.0.0.0", help="where to listen (all addresses)")
    parser.add_argument("--head-seconds", type=float, default=HEAD_SECONDS)
    args = parser.parse_args(argv)
    secret = os.environ.get("PORTAL_SESSION_TOKEN", "")
    if len(secret) < 16:
        print("session_guard: PORTAL_SESSION_TOKEN is missing or short", file=sys.stderr)
        return 2
    guard = Guard(args.upstream, secret, args.head_seconds)
    try:
        asyncio.run(serve(args.port, guard, args.host))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
