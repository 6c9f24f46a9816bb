"""``ClusterHub`` on a real Redis Cluster: sharded pub/sub per node, following slots when they move."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import redis.asyncio as redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from gateway import StoreUnavailableError
from gateway.stores._redis_client import connect, node_client
from gateway.stores._redis_cluster_hub import ClusterHub
from gateway.stores._tail import Subscriber

from ._cluster import ClusterServers

pytestmark = pytest.mark.redis


def _channel(thread_id: str) -> bytes:
    return f"agora:{{{thread_id}}}:live".encode()


def _parse(data: bytes | str) -> list[object]:
    return [data]


async def _eventually(condition: Callable[[], bool], timeout: float = 20) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


async def _publish(port: int, channel: bytes, payload: bytes) -> int:
    client = redis.Redis(port=port)
    try:
        return int(await client.execute_command("SPUBLISH", channel, payload))
    finally:
        await client.aclose()


async def _received(subscriber: Subscriber, payload: bytes, timeout: float = 5) -> None:
    async with asyncio.timeout(timeout):
        while True:
            if subscriber.pending and payload in subscriber.pending:
                return
            subscriber.overflowed = False
            await subscriber.wait()


async def _delivered(port: int, channel: bytes, subscriber: Subscriber, payload: bytes) -> None:
    """Publish until ``payload`` reaches ``subscriber`` (while it settles, it may be told to re-read the log)."""
    async with asyncio.timeout(10):
        while True:
            subscriber.overflowed = False  # as ``follow`` does once it re-read the log
            if await _publish(port, channel, payload) == 1:
                with contextlib.suppress(TimeoutError):
                    await _received(subscriber, payload, timeout=1)
                    return
            await asyncio.sleep(0.02)


def _hub(client: RedisCluster, **options: float) -> ClusterHub:
    return ClusterHub(
        client,
        node_client=functools.partial(node_client, client, max_connections=8),
        where="redis+cluster://test",
        parse=_parse,  # type: ignore[arg-type]
        **options,
    )


async def _open(servers: ClusterServers) -> RedisCluster:
    client, _ = connect(servers.url, max_connections=8, options={})
    assert isinstance(client, RedisCluster)
    return client


@pytest.fixture
async def hub(cluster: ClusterServers) -> AsyncIterator[ClusterHub]:
    client = await _open(cluster)
    hub = _hub(client, subscribe_timeout=3.0, heartbeat=1.0)
    try:
        yield hub
    finally:
        await hub.aclose()
        await client.aclose()


async def test_channels_of_every_node_deliver(cluster: ClusterServers, hub: ClusterHub) -> None:
    threads = await cluster.threads_on_every_node()
    subscribers = {port: Subscriber() for port in threads}
    for port, thread_id in threads.items():
        await hub.attach(_channel(thread_id), subscribers[port])
        assert hub.node_of(_channel(thread_id)) == f"127.0.0.1:{port}"
    assert hub.connected
    for port, thread_id in threads.items():
        assert await _publish(port, _channel(thread_id), f"hello {port}".encode()) == 1
    for port, subscriber in subscribers.items():
        await _received(subscriber, f"hello {port}".encode())
    assert "nodes=3" in repr(hub)


async def test_many_slots_on_one_node_and_a_dropped_connection(cluster: ClusterServers, hub: ClusterHub) -> None:
    port = (await cluster.master_ports())[0]
    threads = [await cluster.thread_on(port, stem=f"s{index}") for index in range(40)]
    channels = [_channel(thread_id) for thread_id in threads]
    assert len({channel for channel in channels}) == 40
    subscribers = [Subscriber() for _ in channels]
    # Started together: the writer sends them in one round, one SSUBSCRIBE per slot (no CROSSSLOT).
    await asyncio.gather(*(hub.attach(c, s) for c, s in zip(channels, subscribers, strict=True)))
    for channel, subscriber in zip(channels, subscribers, strict=True):
        assert await _publish(port, channel, b"one") == 1
        await _received(subscriber, b"one")

    # The node drops the pub/sub connection: the hub resubscribes every slot and has them re-read.
    admin = redis.Redis(port=port)
    try:
        await admin.execute_command("CLIENT KILL TYPE pubsub")
    finally:
        await admin.aclose()
    await _eventually(lambda: all(s.overflowed for s in subscribers))
    for channel, subscriber in zip(channels, subscribers, strict=True):
        await _delivered(port, channel, subscriber, b"two")


async def test_last_detach_unsubscribes_and_aclose_leaves_no_task(cluster: ClusterServers) -> None:
    client = await _open(cluster)
    hub = _hub(client)
    try:
        port = (await cluster.master_ports())[1]
        channel = _channel(await cluster.thread_on(port))
        first, second = Subscriber(), Subscriber()
        await hub.attach(channel, first)
        await hub.attach(channel, second)
        assert hub.subscribers(channel) == 2
        hub.detach(channel, first)
        assert await _publish(port, channel, b"x") == 1
        hub.detach(channel, second)
        assert hub.subscribers(channel) == 0

        async def gone() -> None:
            while await _publish(port, channel, b"y") != 0:
                await asyncio.sleep(0.02)

        await asyncio.wait_for(gone(), 5)
    finally:
        await hub.aclose()
        await client.aclose()
    left = [task for task in asyncio.all_tasks() if task.get_name().startswith("agora-redis")]
    assert left == []
    with pytest.raises(RuntimeError):
        await hub.attach(channel, Subscriber())


async def test_node_killed_without_replica_then_restarted(cluster: ClusterServers, hub: ClusterHub) -> None:
    threads = await cluster.threads_on_every_node()
    subscribers = {port: Subscriber() for port in threads}
    for port, thread_id in threads.items():
        await hub.attach(_channel(thread_id), subscribers[port])
    victim, *others = list(threads)
    cluster.kill(victim)
    await _eventually(lambda: not hub.connected, timeout=10)

    # A new channel of the node cannot be followed meanwhile; the other nodes keep delivering.
    fresh = _channel(await cluster.thread_on(victim, stem="fresh"))
    with pytest.raises(StoreUnavailableError):
        await hub.attach(fresh, Subscriber())
    assert hub.subscribers(fresh) == 0
    for port in others:
        assert await _publish(port, _channel(threads[port]), b"during") == 1
        await _received(subscribers[port], b"during")

    await cluster.restart(victim)
    await cluster.wait_ok()
    await _eventually(lambda: hub.connected, timeout=15)
    assert subscribers[victim].overflowed  # it re-reads the log after the outage
    assert hub.node_of(_channel(threads[victim])) == f"127.0.0.1:{victim}"
    await _delivered(victim, _channel(threads[victim]), subscribers[victim], b"after")
    assert hub.reconnections >= 1


async def test_failover_rehomes_channels_on_the_promoted_replica(tmp_path: Path) -> None:
    servers = ClusterServers(tmp_path, masters=3, replicas=1)
    try:
        await servers.start()
        client = await _open(servers)
        hub = _hub(client, subscribe_timeout=3.0, heartbeat=1.0)
        try:
            threads = await servers.threads_on_every_node()
            subscribers = {port: Subscriber() for port in threads}
            for port, thread_id in threads.items():
                await hub.attach(_channel(thread_id), subscribers[port])
            victim, *others = list(threads)
            channel = _channel(threads[victim])

            servers.kill(victim)
            for port in others:  # the other nodes deliver throughout
                assert await _publish(port, _channel(threads[port]), b"during") == 1
                await _received(subscribers[port], b"during")
            promoted = await servers.failed_over(victim)

            await _eventually(lambda: hub.node_of(channel) == f"127.0.0.1:{promoted}")
            await _eventually(lambda: hub.subscribers(channel) == 1 and hub.connected)
            assert subscribers[victim].overflowed
            assert hub.rehomed >= 1
            await _delivered(promoted, channel, subscribers[victim], b"after")
            for port in others:
                assert await _publish(port, _channel(threads[port]), b"still") == 1
                await _received(subscribers[port], b"still")
            # A new subscriber goes to the promoted replica directly.
            late = Subscriber()
            await hub.attach(channel, late)
            assert hub.subscribers(channel) == 2
        finally:
            await hub.aclose()
            await client.aclose()
    finally:
        servers.stop()


async def _move_slot(ports: list[int], target: int, slot: int) -> None:
    """Give the (keyless) ``slot`` to ``target``, telling the new owner first."""
    admin = redis.Redis(port=target, decode_responses=True)
    try:
        target_id = str(await admin.execute_command("CLUSTER MYID"))
    finally:
        await admin.aclose()
    for port in [target, *[p for p in ports if p != target]]:
        client = redis.Redis(port=port)
        try:
            await client.execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
        finally:
            await client.aclose()


async def test_a_moved_slot_is_followed_to_its_new_node(cluster: ClusterServers, hub: ClusterHub) -> None:
    source, target, _ = await cluster.master_ports()
    followed = _channel(await cluster.thread_on(source, stem="followed"))
    subscriber = Subscriber()
    await hub.attach(followed, subscriber)
    assert hub.node_of(followed) == f"127.0.0.1:{source}"

    # The slot leaves the node: Redis tells its shard subscribers (sunsubscribe), the hub re-homes.
    await _move_slot(await cluster.master_ports(), target, key_slot(followed))
    await _eventually(lambda: hub.node_of(followed) == f"127.0.0.1:{target}" and hub.connected)
    await _eventually(lambda: subscriber.overflowed)
    await _delivered(target, followed, subscriber, b"moved")

    # A slot moved behind the hub's back: SSUBSCRIBE answers MOVED, attach follows it.
    stale = _channel(await cluster.thread_on(source, stem="stale"))
    await _move_slot(await cluster.master_ports(), target, key_slot(stale))
    late = Subscriber()
    await hub.attach(stale, late)
    assert hub.node_of(stale) == f"127.0.0.1:{target}"
    assert await _publish(target, stale, b"late") == 1
    await _received(late, b"late")
