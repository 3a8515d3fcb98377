"""A real Redis failover under Sentinel: a master, its replica and a sentinel of the
test's own (redis-server in sentinel mode, what Debian's redis-sentinel runs). The cache, the channel layer and the Celery broker,
built exactly as portal.settings builds them with REDIS_SENTINELS, keep working when the
master is killed and the sentinel promotes the replica, with what was written before."""

import asyncio
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
import redis
from channels_redis.core import RedisChannelLayer
from django.core.cache.backends.redis import RedisCache
from kombu import Connection

from portal import redis_ha
from tests import polling
from tests.livestack import free_port

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
MASTER = "portal"


class Group:
    """A master, its replica and one sentinel (quorum 1) on free ports."""

    def __init__(self, tmp: Path):
        self.tmp, self.password = tmp, secrets.token_hex(16)
        self.ports = {"a": free_port(), "b": free_port(), "sentinel": free_port()}
        self.procs: dict[str, subprocess.Popen] = {}

    def _redis(self, name: str, *extra: str) -> None:
        conf = self.tmp / f"{name}.conf"
        lines = [f"port {self.ports[name]}", "bind 127.0.0.1", f'dir "{self.tmp}"']
        lines += [f"requirepass {self.password}", f"masterauth {self.password}", 'save ""']
        lines += [f"dbfilename {name}.rdb", *extra]
        conf.write_text("\n".join(lines) + "\n")
        conf.chmod(0o600)
        self.procs[name] = subprocess.Popen(
            [REDIS_SERVER, str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def start(self) -> "Group":
        self._redis("a")
        self._redis("b", f"replicaof 127.0.0.1 {self.ports['a']}")
        conf = self.tmp / "sentinel.conf"  # rewritten by the sentinel as it learns
        conf.write_text(
            f'port {self.ports["sentinel"]}\nbind 127.0.0.1\ndir "{self.tmp}"\n'
            f"sentinel monitor {MASTER} 127.0.0.1 {self.ports['a']} 1\n"
            f"sentinel auth-pass {MASTER} {self.password}\n"
            f"sentinel down-after-milliseconds {MASTER} 1000\n"
            f"sentinel failover-timeout {MASTER} 10000\n"
        )
        conf.chmod(0o600)
        self.procs["sentinel"] = subprocess.Popen(
            [REDIS_SERVER, str(conf), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        polling.until(self.replicas_in_sync, 30, "the replica to sync", interval=0.1)
        polling.until(
            lambda: self.master_port() == self.ports["a"], 30, "the sentinel to see a", 0.1
        )
        # It can promote only a replica it has learnt of (from a's INFO, every 10 s).
        polling.until(self.sentinel_knows_b, 30, "the sentinel to learn of b", interval=0.1)
        return self

    def client(self, name: str) -> redis.Redis:
        return redis.Redis(port=self.ports[name], password=self.password, socket_timeout=1)

    def replicas_in_sync(self) -> bool:
        try:
            return self.client("b").info("replication").get("master_link_status") == "up"
        except redis.RedisError:
            return False

    def sentinel_knows_b(self) -> bool:
        try:
            replicas = redis.Redis(port=self.ports["sentinel"], socket_timeout=1).execute_command(
                "SENTINEL", "replicas", MASTER
            )
        except redis.RedisError:
            return False
        return any(str(self.ports["b"]) in str(replica) for replica in replicas)

    def master_port(self) -> int | None:
        """The master's port once the sentinel sees it healthy, no failover under way
        (clients find no master meanwhile: redis-py's sentinel pools skip a master the
        sentinel flags down)."""
        try:
            (state,) = redis.Redis(port=self.ports["sentinel"], socket_timeout=1).execute_command(
                "SENTINEL", "masters"
            )
        except (redis.RedisError, ValueError):
            return None
        return int(state[b"port"]) if state[b"flags"] == b"master" else None

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.wait(10)


@pytest.fixture
def group(tmp_path):
    group = Group(tmp_path).start()
    yield group
    group.stop()


def test_cache_channel_layer_and_broker_follow_the_master_through_a_failover(group):
    url = f"redis://:{group.password}@unused/0"  # REDIS_URL: only the password and db count
    sentinels = [("127.0.0.1", group.ports["sentinel"])]
    options = redis_ha.cache_options(sentinels, MASTER, None)
    cache = RedisCache(url, {"OPTIONS": {"serializer": "common.cache.JSONSerializer", **options}})
    layer = RedisChannelLayer(hosts=[redis_ha.channel_layer_host(url, sentinels, MASTER, None)])
    broker = {
        "hostname": redis_ha.broker_url(url, sentinels),
        "transport": "portal.worker:SentinelTransport",
        "transport_options": redis_ha.broker_transport_options(MASTER, None),
    }

    # Before: everything on a, replicated to b.
    cache.set("lock", {"holder": "w1"}, 60)
    with Connection(**broker) as conn, conn.SimpleQueue("portal-test-ha") as queue:
        queue.put({"job": 7})
    channel = asyncio.run(layer.new_channel())
    asyncio.run(layer.send(channel, {"type": "job.update", "state": "running"}))
    assert group.client("a").execute_command("WAIT", 1, 5000) == 1  # b has it all

    group.procs["a"].kill()
    group.procs["a"].wait(10)
    polling.until(
        lambda: group.master_port() == group.ports["b"], 30, "the sentinel to promote b", 0.1
    )

    # After: the same objects find b. The first command on a pooled connection to the dead
    # master may fail once (what a request or a task sees during the failover: a 503, a retry).
    def first(call):
        try:
            return call()
        except (redis.ConnectionError, redis.TimeoutError, ConnectionError):
            return call()

    assert first(lambda: cache.get("lock")) == {"holder": "w1"}
    assert first(lambda: cache.add("lock-2", "w2", 60)) is True
    message = first(lambda: asyncio.run(layer.receive(channel)))
    assert message == {"type": "job.update", "state": "running"}
    with Connection(**broker) as conn, conn.SimpleQueue("portal-test-ha") as queue:
        got = queue.get(timeout=10)
        assert got.payload == {"job": 7}
        got.ack()
        queue.put({"job": 8})
        assert queue.get(timeout=10).payload == {"job": 8}
    assert group.client("b").get(cache.make_and_validate_key("lock-2")) is not None
