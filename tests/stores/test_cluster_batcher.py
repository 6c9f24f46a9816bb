"""``ClusterBatcher`` on a real 3-master cluster: routing by slot, NOSCRIPT per node, a dead master, a failover."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError

from gateway.stores._redis_client import connect, node_client
from gateway.stores._redis_cluster_batch import ClusterBatcher, command_slot
from gateway.stores._redis_scripts import RENEW

from ._cluster import ClusterServers

pytestmark = pytest.mark.redis


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterServers]:
    """One cluster for the module's tests that leave it as they found it (started outside any test's loop)."""
    servers = ClusterServers(tmp_path_factory.mktemp("batcher-cluster"), masters=3)
    try:
        asyncio.run(servers.start())
        yield servers
    finally:
        servers.stop()


def _batcher(client: RedisCluster) -> ClusterBatcher:
    return ClusterBatcher(client, node_client=functools.partial(node_client, client, max_connections=8))


async def _cluster_client(url: str) -> RedisCluster:
    client, _ = connect(url, max_connections=8, options={})
    assert isinstance(client, RedisCluster)
    return client


def test_a_command_is_routed_by_its_first_key() -> None:
    assert command_slot(("GET", "a:{t1}:x")) == command_slot(("EVALSHA", "sha", 2, "b:{t1}:y", "c:{zz}"))
    assert command_slot(("EVALSHA", "sha", 0, "arg")) is None
    assert command_slot(("PING",)) is None


async def test_one_send_over_every_node_answers_in_order(cluster: ClusterServers) -> None:
    threads = await cluster.threads_on_every_node(stem="route")
    client = await _cluster_client(cluster.url)
    batcher = _batcher(client)
    try:
        keys = [f"route:{{{thread_id}}}:k" for thread_id in threads.values()]
        commands = [("SET", key, str(i)) for i, key in enumerate(keys)] + [("GET", key) for key in keys]
        replies = await batcher.send(commands)
        assert replies == [b"OK"] * 3 + [b"0", b"1", b"2"]
        assert set(batcher.node_batchers()) == {f"127.0.0.1:{port}" for port in threads}
        assert batcher.redirects == 0
        # Each key is on the node its slot names, and nowhere else.
        for port, key in zip(threads, keys, strict=True):
            assert await cluster.port_of(key) == port
        # Many concurrent sends to every node coalesce into pipelines per node.
        await asyncio.gather(*(batcher.send([("GET", key) for key in keys]) for _ in range(50)))
        assert batcher.pipelines > 0
        await batcher.send([("DEL", key) for key in keys])
    finally:
        await batcher.aclose()
        await client.aclose()


async def test_a_script_one_node_forgot_is_loaded_on_that_node(cluster: ClusterServers) -> None:
    threads = await cluster.threads_on_every_node(stem="noscript")
    client = await _cluster_client(cluster.url)
    batcher = _batcher(client)
    forgetful = next(iter(threads))
    try:
        keys = {port: f"noscript:{{{thread_id}}}:lease" for port, thread_id in threads.items()}
        await batcher.send([("SET", key, "me") for key in keys.values()])
        await batcher.send([RENEW.command([key], ["me", 5000]) for key in keys.values()])  # loaded everywhere
        node = redis.Redis(port=forgetful)
        try:
            await node.script_flush()
            assert await node.script_exists(RENEW.sha) == [False]
            replies = await batcher.send([RENEW.command([key], ["me", 5000]) for key in keys.values()])
            assert replies == [1, 1, 1]
            assert await node.script_exists(RENEW.sha) == [True]
        finally:
            await node.aclose()
        await batcher.send([("DEL", key) for key in keys.values()])
    finally:
        await batcher.aclose()
        await client.aclose()


async def test_a_dead_master_fails_its_commands_only_and_a_promoted_replica_takes_them(tmp_path: Path) -> None:
    servers = ClusterServers(tmp_path, masters=3, replicas=1)
    try:
        await servers.start()
        threads = await servers.threads_on_every_node(stem="failover")
        client = await _cluster_client(servers.url)
        batcher = _batcher(client)
        try:
            keys = {port: f"failover:{{{thread_id}}}:k" for port, thread_id in threads.items()}
            await batcher.send([("SET", key, "v") for key in keys.values()])
            victim = next(iter(threads))
            probe = redis.Redis(port=victim)
            assert await probe.execute_command("WAIT", 1, 5000) == 1  # the replica has the write
            await probe.aclose()
            servers.kill(victim)
            replies = await batcher.send([("GET", key) for key in keys.values()])
            assert isinstance(replies[0], RedisConnectionError)
            assert replies[1:] == [b"v", b"v"], "the other masters' keys are unaffected"
            promoted = await servers.failed_over(victim)
            async with asyncio.timeout(15):
                while True:
                    replies = await batcher.send([("GET", key) for key in keys.values()])
                    if not isinstance(replies[0], Exception):
                        break
                    await asyncio.sleep(0.1)
            assert replies == [b"v", b"v", b"v"]
            assert f"127.0.0.1:{promoted}" in batcher.node_batchers()
        finally:
            await batcher.aclose()
            await client.aclose()
    finally:
        servers.stop()
