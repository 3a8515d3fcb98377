"""Redis made highly available with Sentinel: the broker (Celery), the cache (locks,
throttles, one-time codes) and the channel layer (live pages) all follow the master the
sentinels name, and find the new one after a failover.

With REDIS_SENTINELS=host:port,host:port and REDIS_SENTINEL_MASTER=<name>, REDIS_URL
gives only the master's password and database number (its host is not used: Sentinel
names the master; a ``rediss://`` one is refused, as TLS is not carried through here
yet, and outside PORTAL_DEMO the sentinels must have a password: ``check_sentinel_mode``).
Each piece is built here, from plain values, so that the settings
(portal/settings/computed.py) stay a list of assignments and the tests can check each
without a Sentinel:

- Celery: kombu's Sentinel transport (``sentinel://`` alternates, ``master_name``),
  mended like the plain one (portal/worker.py);
- channels_redis: a host given as ``{"master_name", "sentinels", ...}`` (its
  SentinelConnectionPool, core and pub/sub layers alike);
- Django's Redis cache: a connection pool class that asks the sentinels
  (``SentinelPool`` below), since the backend takes any pool with ``from_url``.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured
from redis.sentinel import Sentinel, SentinelConnectionPool

HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})\Z")
MASTER_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")


def parse_sentinels(value: list[str], name: str = "REDIS_SENTINELS") -> list[tuple[str, int]]:
    """``["host:port", ...]`` as (host, port) pairs, or a start-up error naming ``name``."""
    found = []
    for item in value:
        match = HOST_PORT.match(item)
        if not match or not 0 < int(match[2]) < 65536:
            raise ImproperlyConfigured(f"{name}: {item!r} is not host:port")
        found.append((match[1].strip("[]"), int(match[2])))
    return found


def check_master(name: str) -> str:
    if not MASTER_NAME.match(name):
        raise ImproperlyConfigured(
            f"REDIS_SENTINEL_MASTER={name!r}: give the master's name as the sentinels know it "
            "(letters, digits, '.', '_', '-')"
        )
    return name


def check_sentinel_mode(redis_url: str, sentinel_password: str | None, *, demo: bool) -> None:
    """What Sentinel mode refuses at start-up, with the setting to change:

    - TLS (``rediss://``): the pieces built here do not carry TLS to the sentinels or to the
      master they name yet, so the portal would fall back to plain TCP without a word;
    - sentinels without a password (outside PORTAL_DEMO): whoever reaches one unauthenticated
      could name any address as the master, and the broker, cache and channel layer (with
      the master's password) would follow it."""
    if urlsplit(redis_url).scheme.lower() == "rediss":
        raise ImproperlyConfigured(
            "REDIS_URL is rediss:// (TLS), but Sentinel mode (REDIS_SENTINELS) does not carry "
            "TLS yet and would talk to the sentinels and the master in clear: use Redis without "
            "Sentinel for TLS, or redis:// on a network you trust"
        )
    if not sentinel_password and not demo:
        raise ImproperlyConfigured(
            "REDIS_SENTINEL_PASSWORD (or REDIS_SENTINEL_PASSWORD_FILE) is required with "
            "REDIS_SENTINELS: an unauthenticated sentinel lets anyone who reaches it name the "
            "master the portal follows; set requirepass on every sentinel and give it here"
        )


def master_auth(redis_url: str) -> tuple[str | None, str | None, int]:
    """(user name, password, database number) from REDIS_URL."""
    parts = urlsplit(redis_url)
    db = parts.path.strip("/") or "0"
    if not db.isdigit():
        raise ImproperlyConfigured(f"REDIS_URL: the database number {db!r} is not a number")
    user, password = parts.username, parts.password
    return unquote(user) if user else None, unquote(password) if password else None, int(db)


def broker_url(redis_url: str, sentinels: list[tuple[str, int]]) -> str:
    """Kombu's form: ``sentinel://[:password@]host:port/db`` per sentinel, joined by ';'
    (the password is the master's; the sentinels' own goes in ``sentinel_kwargs``)."""
    user, password, db = master_auth(redis_url)
    auth = ""
    if password:
        auth = f"{quote(user or '', safe='')}:{quote(password, safe='')}@"
    return ";".join(
        f"sentinel://{auth}{f'[{h}]' if ':' in h else h}:{p}/{db}" for h, p in sentinels
    )


def sentinel_kwargs(sentinel_password: str | None) -> dict[str, Any]:
    """How to reach the sentinels themselves (short timeouts: a dead one is skipped)."""
    kwargs: dict[str, Any] = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0}
    if sentinel_password:
        kwargs["password"] = sentinel_password
    return kwargs


def broker_transport_options(master: str, sentinel_password: str | None) -> dict[str, Any]:
    return {"master_name": master, "sentinel_kwargs": sentinel_kwargs(sentinel_password)}


def channel_layer_host(
    redis_url: str, sentinels: list[tuple[str, int]], master: str, sentinel_password: str | None
) -> dict[str, Any]:
    """One channels_redis host entry that follows the master."""
    user, password, db = master_auth(redis_url)
    host: dict[str, Any] = {
        "master_name": master,
        "sentinels": sentinels,
        "sentinel_kwargs": sentinel_kwargs(sentinel_password),
        "db": db,
    }
    if user:
        host["username"] = user
    if password:
        host["password"] = password
    return host


def cache_options(
    sentinels: list[tuple[str, int]], master: str, sentinel_password: str | None
) -> dict[str, Any]:
    """OPTIONS for Django's Redis cache (its LOCATION stays REDIS_URL)."""
    return {
        "pool_class": "portal.redis_ha.SentinelPool",
        "sentinels": sentinels,
        "master_name": master,
        "sentinel_kwargs": sentinel_kwargs(sentinel_password),
    }


class SentinelPool(SentinelConnectionPool):
    """A connection pool to the master the sentinels name, built the way Django's Redis
    cache builds its pools (``from_url(LOCATION, **OPTIONS)``)."""

    @classmethod
    def from_url(  # type: ignore[override]  # Django passes the sentinels as options
        cls,
        url: str,
        *,
        sentinels: list[tuple[str, int]],
        master_name: str,
        sentinel_kwargs: dict[str, Any] | None = None,
        **options: Any,
    ) -> SentinelPool:
        user, password, db = master_auth(url)
        auth = {"username": user, "password": password, "db": db}
        kwargs = {**{k: v for k, v in auth.items() if v is not None}, **options}
        manager = Sentinel(sentinels, sentinel_kwargs=sentinel_kwargs, **kwargs)
        return cls(master_name, manager, **kwargs)
