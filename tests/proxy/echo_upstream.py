"""A stand-in notebook for the proxy tests: `python echo_upstream.py PORT`.

HTTP: answers with the request's path, Authorization and Cookie headers as JSON, and
Set-Cookies: one host-only, two that try to reach the parent domain. WebSocket: echoes every message.
"""

import asyncio
import json
import sys

from websockets.asyncio.server import serve
from websockets.datastructures import Headers
from websockets.http11 import Response


async def echo(ws):
    async for message in ws:
        await ws.send(message)


def process_request(connection, request):
    if request.headers.get("Upgrade", "").lower() == "websocket":
        return None
    body = json.dumps(
        {
            "port": int(sys.argv[1]),
            "path": request.path,
            "authorization": request.headers.get("Authorization"),
            "cookie": request.headers.get("Cookie"),
        }
    ).encode()
    headers = Headers(
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("Set-Cookie", "kept=1; Path=/; HttpOnly"),
            ("Set-Cookie", "tossed=1; Domain=sessions.localhost; Path=/"),
            # Browsers use the last Domain attribute: removing the first is not enough.
            ("Set-Cookie", "sly=1; Domain=other.localhost; Path=/; DOMAIN=sessions.localhost"),
            # Would wipe the cookies of the whole site, the portal's included.
            ("Clear-Site-Data", '"cookies"'),
        ]
    )
    return Response(200, "OK", headers, body)


async def main() -> None:
    async with serve(echo, "127.0.0.1", int(sys.argv[1]), process_request=process_request):
        print("listening", flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main())
