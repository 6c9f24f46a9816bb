"""The media backend and the render cache on a real 3-master Redis Cluster (and the app's path to it).

A thread's items live under its hash tag, beside its set: ``forget_thread`` is one script on the
thread's node. ``get`` follows a per-media-id pointer (another slot, often another node) written
before the item: a put that fails between the two leaves a miss, never an item nobody can erase.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

from gateway import Settings
from gateway.app import _caches
from gateway.stores import MemoryStore
from renderers import MediaItem, MediaStore, MediaUnavailableError, RedisMediaBackend, RedisRenderCache
from renderers._rendered import Rendered
from tools import UserError

from ._cluster import ClusterServers, node_of_slot

pytestmark = pytest.mark.redis

SECRET = "a-secret-of-sixteen-bytes-or-more"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@pytest.fixture
async def client(cluster: ClusterServers) -> AsyncIterator[RedisCluster]:
    redis = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", port) for port in cluster.ports])
    try:
        yield redis
    finally:
        await redis.aclose()


async def test_a_threads_media_on_every_node_are_put_read_and_forgotten(
    cluster: ClusterServers, client: RedisCluster
) -> None:
    prefix = f"media-{uuid.uuid4().hex[:8]}:"
    store = MediaStore(SECRET, ttl=120, backend=RedisMediaBackend(client, prefix=prefix))
    threads = await cluster.threads_on_every_node()
    assert len(threads) == 3
    tokens = {
        port: [await store.put(PNG, "image/png", thread_id=tid, filename="a.png") for _ in range(3)]
        for port, tid in threads.items()
    }
    loose = await store.put(PNG, "application/pdf")
    for port, tid in threads.items():
        # The thread's set and items are on the thread's node (the store's node for the thread).
        assert await cluster.port_of(f"{prefix}{{{tid}}}") == port
        assert (await store.get(tokens[port][0])) == MediaItem(PNG, "image/png", "a.png")
    per_node = await cluster.keys_per_node(f"{prefix}*")
    assert all(count >= 4 for count in per_node.values()), per_node  # each node: a set and three items at least
    first, *others = threads.items()
    assert await store.forget_thread(first[1]) == 3
    for token in tokens[first[0]]:
        assert (await store.backend.get(store.verify(token)[0])) is None
    for port, _ in others:
        for token in tokens[port]:
            assert (await store.get(token)).data == PNG
    assert (await store.get(loose)).mime == "application/pdf"
    assert await store.forget_thread(first[1]) == 0
    left = {key.decode() for port in cluster.ports for key in await _keys(port, f"{prefix}*")}
    assert not [key for key in left if first[1] in key]
    # Its pointers went too: the two other threads' three pointers, three items and set, and the loose item.
    assert len(left) == 2 * 7 + 1


async def _keys(port: int, pattern: str) -> list[bytes]:
    import redis.asyncio as redis

    node = redis.Redis(port=port)
    try:
        return [key async for key in node.scan_iter(match=pattern, count=1000)]
    finally:
        await node.aclose()


async def test_the_render_cache_gets_and_sets_on_every_node(cluster: ClusterServers, client: RedisCluster) -> None:
    prefix = f"render-{uuid.uuid4().hex[:8]}:"
    cache = RedisRenderCache(client, prefix=prefix, ttl=60)
    keys = [f"k{index}" for index in range(30)]
    for index, key in enumerate(keys):
        await cache.set(key, Rendered(f"text {index}", "text/plain", (), 1))
    for index, key in enumerate(keys):
        assert await cache.get(key) == Rendered(f"text {index}", "text/plain", (), 1)
    assert await cache.get("missing") is None
    per_node = await cluster.keys_per_node(f"{prefix}*")
    assert len(per_node) == 3 and all(per_node.values()), per_node


async def test_a_put_whose_item_write_failed_leaves_a_miss_and_forget_working(
    cluster: ClusterServers, client: RedisCluster
) -> None:
    prefix = f"media-{uuid.uuid4().hex[:8]}:"
    backend = RedisMediaBackend(client, prefix=prefix)
    item_node, tid = next(iter((await cluster.threads_on_every_node()).items()))
    slots = await cluster.slots()
    # A media id whose pointer lives on another node than the thread's items.
    media_id = next(
        mid
        for mid in (uuid.uuid4().hex for _ in range(1000))
        if node_of_slot(slots, key_slot(f"{prefix}{mid}".encode())) != item_node
    )
    await backend.put("kept", MediaItem(PNG, "image/png"), 2e9, thread_id=tid)
    cluster.kill(item_node)
    with pytest.raises(MediaUnavailableError):
        await backend.put(media_id, MediaItem(PNG, "image/png"), 2e9, thread_id=tid)
    await cluster.restart(item_node)
    await cluster.wait_ok()
    pointer = await client.hgetall(f"{prefix}{media_id}")
    assert pointer == {b"thread": tid.encode()}  # the pointer was written, the item was not
    assert await backend.get(media_id) is None
    assert await backend.forget_thread(tid) == 1  # the item kept before the failure
    assert await backend.get("kept") is None


async def test_a_cluster_url_gives_the_app_a_cluster_media_backend(cluster: ClusterServers) -> None:
    prefix = f"app{uuid.uuid4().hex[:8]}"
    settings = Settings(store_url=f"{cluster.url}?prefix={prefix}")
    media, _, clients = _caches(settings, b"s" * 32, MemoryStore())
    try:
        assert isinstance(clients[0], RedisCluster)
        tid = next(iter((await cluster.threads_on_every_node()).values()))
        token = await media.put(PNG, "image/png", thread_id=tid)
        assert (await media.get(token)).data == PNG
        assert await media.forget_thread(tid) == 1
    finally:
        for opened in clients:
            await opened.aclose()


async def test_a_decoding_cluster_client_is_refused(cluster: ClusterServers) -> None:
    decoding = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", cluster.ports[0])], decode_responses=True)
    try:
        with pytest.raises(UserError, match="decode_responses=False"):
            RedisMediaBackend(decoding)
        with pytest.raises(UserError, match="decode_responses=False"):
            RedisRenderCache(decoding)
    finally:
        await decoding.aclose()
