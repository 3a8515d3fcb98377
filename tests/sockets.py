"""Websockets in-process: the ASGI application through Channels' communicator, signed in
with a Django session cookie (the browser's way)."""

import asyncio

from channels.testing import WebsocketCommunicator
from django.test import Client

from portal.asgi import application


def session_cookie(user) -> bytes:
    """The Cookie header of a session signed in as ``user``."""
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def connect(path, user=None, origin=b"http://localhost"):
    """(communicator, connected, close code) of a socket to ``path``; ``user`` is a
    session_cookie()."""
    headers = [(b"origin", origin), (b"host", b"localhost")]
    if user is not None:
        headers.append((b"cookie", user))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect()
    return communicator, connected, code


def run(coro, timeout: float = 60):
    """Run ``coro`` to its end from a synchronous test, on an event loop of its own whose
    closing is bounded. (asyncio.run, and async_to_sync, wait at the close for every task
    they cancel: a refused socket's consumer, still waiting for a disconnect, had its
    channel-layer receive cancelled mid-BZPOPMIN there, and the close once waited on it
    for ever. Its database calls run in asgiref's one thread for sync code.)"""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, timeout))
    finally:
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.wait(left, timeout=5))
        loop.close()
