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
    python3 session_guard.py --port 8888 --upstream 127.0.0.1:9000 --ready-path /healthz
    python3 session_guard.py --port 8888 --upstream unix:/p/app.sock --ready-path /healthz \\
        -- code-server --socket /p/app.sock …

With ``--ready-path`` the guard first waits (up to ``--ready-seconds``) until the app
answers a GET of that path with a status in ``--ready-status`` (200-399), and only then
listens: the session's port accepting a connection means the app is ready, which is what
the registration waits for. An app that never gets ready stops the guard with exit 3.

With an app's command after ``--``, the guard starts it, and the two live and end
together: the guard exits with the app's status when it ends, and stops it (SIGTERM, then
SIGKILL after 10 s) when the guard is stopped or the app never gets ready.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import os
import signal
import sys
import time

try:  # beside it in the work directory (session_start.sh writes it)
    import port_owner  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - an older job's directory
    port_owner = None

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
        # A port another user took first: their server would receive the person's requests.
        held = port_owner.others(int(port)) if port_owner is not None else set()
        if held:
            print(
                f"portal: port {port} is held by another user (uid {sorted(held)})", file=sys.stderr
            )
            raise ConnectionRefusedError(f"port {port} is held by another user")
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


def status_ok(status: int, wanted: str) -> bool:
    """``wanted`` is ``200-399`` or ``200`` or ``200,302``."""
    for part in wanted.split(","):
        low, _, high = part.strip().partition("-")
        if int(low) <= status <= int(high or low):
            return True
    return False


async def ready_status(guard: Guard, path: str) -> int | None:
    """The status the app answers a GET of ``path`` with, None when it does not answer."""
    try:
        reader, writer = await asyncio.wait_for(guard.connect(), 5)
    except (ConnectionError, OSError, asyncio.TimeoutError):  # noqa: UP041
        return None
    try:
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode()
        )
        line = await asyncio.wait_for(reader.readline(), 10)
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(b"HTTP/") and parts[1].isdigit():
            return int(parts[1])
        return None
    except (ConnectionError, OSError, asyncio.TimeoutError, ValueError):  # noqa: UP041
        return None
    finally:
        writer.close()


async def wait_ready(guard: Guard, path: str, wanted: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = await ready_status(guard, path)
        if status is not None and status_ok(status, wanted):
            return True
        await asyncio.sleep(0.2)
    return False


async def run(args: argparse.Namespace, guard: Guard, app_argv: list[str]) -> int:
    """Start the app (when given), wait until it is ready (when asked), then listen; with
    an app, until it exits (its exit status is the guard's), else until stopped."""
    # The app never sees the session's secret: a terminal in it (a shared session's
    # too) would show it, and it opens the node's port around the proxy.
    env = {k: v for k, v in os.environ.items() if k != "PORTAL_SESSION_TOKEN"}
    app = await asyncio.create_subprocess_exec(*app_argv, env=env) if app_argv else None
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, stopped.set)
    ended = asyncio.ensure_future(app.wait() if app is not None else stopped.wait())
    stop = asyncio.ensure_future(stopped.wait())
    try:
        if args.ready_path is not None:
            ready = asyncio.ensure_future(
                wait_ready(guard, args.ready_path, args.ready_status, args.ready_seconds)
            )
            await asyncio.wait({ready, ended, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not ready.done():
                ready.cancel()
                if app is not None and ended.done():
                    print("session_guard: the app ended before it was ready", file=sys.stderr)
                    return app.returncode or 1
                return 0
            if not ready.result():
                print(
                    f"session_guard: the app did not answer {args.ready_path} within "
                    f"{args.ready_seconds:.0f} s",
                    file=sys.stderr,
                )
                return 3
        server = await asyncio.start_server(guard.handle, args.host, args.port, limit=HEAD_MAX)
        async with server:
            await asyncio.wait({ended, stop}, return_when=asyncio.FIRST_COMPLETED)
        return (app.returncode or 0) if app is not None and ended.done() else 0
    finally:
        stop.cancel()
        if app is not None and app.returncode is None:  # stopped, or not ready: the app too
            app.terminate()
            try:
                await asyncio.wait_for(app.wait(), 10)
            except asyncio.TimeoutError:  # noqa: UP041
                app.kill()
                await app.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Let only the portal's proxy reach an app.",
        usage="%(prog)s --port PORT --upstream UPSTREAM [options] [-- APP ARGS...]",
    )
    parser.add_argument("--port", type=int, required=True, help="the session's port")
    parser.add_argument("--upstream", required=True, help="unix:/path or HOST:PORT of the app")
    parser.add_argument("--host", default="0.0.0.0", help="where to listen (all addresses)")
    parser.add_argument("--head-seconds", type=float, default=HEAD_SECONDS)
    parser.add_argument("--ready-path", help="listen only once the app answers GET PATH")
    parser.add_argument("--ready-status", default="200-399", help="statuses that mean ready")
    parser.add_argument("--ready-seconds", type=float, default=900.0)
    argv = list(sys.argv[1:] if argv is None else argv)
    app_argv = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.ready_path is not None and not (
        args.ready_path.startswith("/")
        and args.ready_path.isprintable()
        and " " not in args.ready_path
    ):
        parser.error("--ready-path is a path starting with / without spaces")
    try:
        status_ok(200, args.ready_status)
    except ValueError:
        parser.error("--ready-status is like 200-399 or 200,302")
    secret = os.environ.get("PORTAL_SESSION_TOKEN", "")
    if len(secret) < 16:
        print("session_guard: PORTAL_SESSION_TOKEN is missing or short", file=sys.stderr)
        return 2
    return asyncio.run(run(args, Guard(args.upstream, secret, args.head_seconds), app_argv))


if __name__ == "__main__":
    sys.exit(main())
