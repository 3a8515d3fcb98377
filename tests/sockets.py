"""Websockets in-process: the ASGI application through Channels' communicator, signed in
with a Django session cookie (the browser's way)."""

from asgiref.sync import async_to_sync
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


def run(coro):
    """Run ``coro`` to its end from a synchronous test."""

    async def awaiting():
        return await coro

    return async_to_sync(awaiting)()
