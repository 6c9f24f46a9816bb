"""A thread's slot moved to another master while the store runs: ASK during the move, MOVED after.

The slot is moved by hand as ``redis-cli --cluster reshard`` does it (``CLUSTER SETSLOT ...
IMPORTING`` / ``MIGRATING``, ``MIGRATE`` of its keys, ``SETSLOT ... NODE``) on a private
3-master cluster; the store's batcher must follow both redirections and lose nothing.
"""

from __future__ import annotations

import uuid

import pytest
import redis.asyncio as redis
from redis.crc import key_slot

from gateway import StoreUnavailableError
from gateway.stores import Batch, RedisStore

from ._cluster import ClusterServers
from ._helpers import begin, delta, finish

pytestmark = pytest.mark.redis


async def _node_id(port: int) -> str:
    client = redis.Redis(port=port, decode_responses=True)
    try:
        return str(await client.execute_command("CLUSTER MYID"))
    finally:
        await client.aclose()


async def _begin_move(source: int, target: int, slot: int) -> None:
    """Mark ``slot`` importing on ``target`` and migrating on ``source``, then move its keys."""
    source_id, target_id = await _node_id(source), await _node_id(target)
    src, dst = redis.Redis(port=source), redis.Redis(port=target)
    try:
        await dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
        await src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)
        keys = await src.execute_command("CLUSTER GETKEYSINSLOT", slot, 10_000)
        assert keys, "the thread's keys are on the source"
        await src.execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", *keys)
    finally:
        await src.aclose()
        await dst.aclose()


async def _finish_move(ports: list[int], target: int, slot: int) -> None:
    target_id = await _node_id(target)
    for port in [target, *[p for p in ports if p != target]]:  # the new owner learns it first
        client = redis.Redis(port=port)
        try:
            await client.execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
        finally:
            await client.aclose()


async def test_a_thread_whose_slot_moves_keeps_its_log_through_ask_and_moved(cluster: ClusterServers) -> None:
    masters = await cluster.master_ports()
    source, target = masters[0], masters[1]
    thread_id = await cluster.thread_on(source, stem=f"moving-{uuid.uuid4().hex[:6]}")
    slot = key_slot(thread_id.encode())
    store = RedisStore(cluster.url, prefix=f"test-{uuid.uuid4().hex[:8]}")
    try:
        run, events = await begin(store, thread_id)
        await store.write(thread_id, Batch(events=[delta(run, "a")]))

        await _begin_move(source, target, slot)
        # The keys now live on the target, the slot still belongs to the source: it answers ASK,
        # which a one-key read follows.
        assert [e.seq for e in await store.read_events(thread_id)] == [1, 2]
        asked = store._batcher.redirects  # type: ignore[union-attr]
        assert asked > 0, "the read followed ASK"
        # A script names keys the thread does not have yet (a run's journal): the importing node
        # answers TRYAGAIN until the move ends. The write is refused whole, as unavailable.
        with pytest.raises(StoreUnavailableError, match="rehashing"):
            await store.write(thread_id, Batch(events=[delta(run, "refused")]))

        await _finish_move(masters, target, slot)
        await store.write(thread_id, Batch(events=[delta(run, "b")]))
        await store.write(thread_id, Batch(events=[delta(run, "c")]))
        await finish(store, run)
        assert store._batcher.redirects > asked, "MOVED was followed too"  # type: ignore[union-attr]
        assert await cluster.port_of(f"{store.prefix}:{{{thread_id}}}:thread") == target

        seqs = [e.seq for e in await store.read_events(thread_id)]
        assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 4, seqs
        texts = [e.delta for e in await store.read_events(thread_id) if e.type == "text-delta"]
        assert texts == ["a", "b", "c"]
        assert (await store.get_run(run.run_id)).status == "completed"  # type: ignore[union-attr]
        # The slot map was updated: the next command goes straight to the target.
        before = store._batcher.redirects  # type: ignore[union-attr]
        await store.read_events(thread_id)
        assert store._batcher.redirects == before  # type: ignore[union-attr]
    finally:
        await store.aclose()


async def test_a_plain_url_of_one_cluster_node_says_to_use_a_cluster_url(cluster: ClusterServers) -> None:
    masters = await cluster.master_ports()
    elsewhere = await cluster.thread_on(masters[1])
    store = RedisStore(f"redis://127.0.0.1:{masters[0]}/0", prefix=f"test-{uuid.uuid4().hex[:8]}")
    try:
        with pytest.raises(StoreUnavailableError, match=r"redis\+cluster://"):
            await store.get_thread(elsewhere)
    finally:
        await store.aclose()
