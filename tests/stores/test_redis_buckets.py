"""The global indexes bucketed by thread: where entries land, readers merging every bucket, migration.

Threads are spread over many buckets (``bucket_of``); the readers must answer exactly what one
sorted set would (order, ``before`` pagination), and ``migrate_legacy_indexes`` must move what a
store of the old layout (one key per index) left behind so that readers and sweeps find it.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from typing import Any

import pytest
import redis.asyncio as redis

from gateway.stores import Batch, RedisStore
from gateway.stores._redis_layout import (
    BUCKETS,
    INDEX_NAMES,
    IndexName,
    RedisKeys,
    approval_json,
    bucket_of,
    index_member,
)

from ._cluster import ClusterServers
from ._helpers import approval, begin, finish, new_run
from .conftest import drop_prefix
from .test_queue import queued

pytestmark = pytest.mark.redis


def spread(count: int, stem: str = "t") -> list[str]:
    """``count`` thread ids whose buckets go round robin (0, 1, ... 15, 0, ...): every bucket, interleaved."""
    threads: list[str] = []
    while len(threads) < count:
        thread_id = f"{stem}-{uuid.uuid4().hex[:8]}"
        if bucket_of(thread_id) == len(threads) % BUCKETS:
            threads.append(thread_id)
    return threads


async def members(client: redis.Redis, key: str) -> dict[str, float]:
    return {as_str(m): s for m, s in await client.zrange(key, 0, -1, withscores=True)}


def as_str(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def where(client: redis.Redis, prefix: str, name: IndexName) -> dict[str, list[str]]:
    """Each bucket key of index ``name`` with its members (only the non-empty ones)."""
    found = {key: list(await members(client, key)) for key in RedisKeys(prefix).indexes(name)}
    return {key: entries for key, entries in found.items() if entries}


def thread_in(name: IndexName, member: str) -> str:
    if name in ("activity", "queued-threads"):
        return member
    return str(json.loads(member)[0 if name in ("leases", "approval-expiry") else 1])


async def test_every_entry_lands_in_its_threads_bucket(redis_store: RedisStore, prefix: str) -> None:
    threads = spread(20)
    for thread_id in threads:
        run, _ = await begin(redis_store, thread_id)
        await redis_store.write(thread_id, Batch(run=run, approvals=[approval(run)]))
        await redis_store.enqueue_message(queued(thread_id), limit=5)
    client = redis_store.client
    keys = RedisKeys(prefix)
    for name in INDEX_NAMES:
        assert not await client.exists(keys.legacy_index(name)), name
        layout = await where(client, prefix, name)
        assert sum(len(entries) for entries in layout.values()) == len(threads), name
        for key, entries in layout.items():
            assert all(key == keys.index(name, thread_in(name, member)) for member in entries), name
        assert len(layout) == BUCKETS, name  # spread over every bucket

    # Erasure takes each entry out of the bucket it is in.
    for thread_id in threads[:5]:
        assert await redis_store.delete_thread(thread_id)
    for name in INDEX_NAMES:
        left = {thread_in(name, m) for entries in (await where(client, prefix, name)).values() for m in entries}
        assert left == set(threads[5:]), name


async def test_readers_merge_every_bucket_in_order_with_pagination(redis_store: RedisStore) -> None:
    threads = spread(40)
    runs = []
    approvals = []
    base = time.time() - 1000
    for k, thread_id in enumerate(threads):
        run, _ = await begin(redis_store, thread_id)
        runs.append(run)
        # Ties of requested_ts across buckets: the tool call id orders them.
        record = approval(run).model_copy(update={"requested_ts": base + k // 3})
        approvals.append(record)
        await redis_store.write(thread_id, Batch(run=run, approvals=[record]))
    expected = sorted(approvals, key=lambda a: (a.requested_ts, a.tool_call_id), reverse=True)

    for size in (1, 3, 7, 100):
        seen: list[str] = []
        before = None
        for _ in range(100):
            page = await redis_store.open_approvals(before=before, limit=size)
            if not page:
                break
            seen.extend(a.tool_call_id for a in page)
            before = (page[-1].requested_ts, page[-1].tool_call_id)
        assert seen == [a.tool_call_id for a in expected], size

    newest = sorted(runs, key=lambda r: (r.created_at, index_member(r.run_id, r.thread_id)), reverse=True)
    assert [run.run_id for run in await redis_store.recent_runs(limit=15)] == [r.run_id for r in newest][:15]
    assert [run.run_id for run in await redis_store.recent_runs(limit=100)] == [r.run_id for r in newest]

    for run in runs:
        await finish(redis_store, run)
    idle = await redis_store.idle_threads(time.time() + 60, limit=10)
    assert idle == threads[:10]  # oldest first, across buckets
    assert await redis_store.idle_threads(time.time() + 60, limit=100) == threads


async def test_queued_threads_merge_buckets_and_stale_entries_leave_their_bucket(
    redis_store: RedisStore, prefix: str
) -> None:
    threads = spread(24, "q")
    for thread_id in threads:
        run, _ = await begin(redis_store, thread_id)
        await finish(redis_store, run)
        await redis_store.enqueue_message(queued(thread_id), limit=5)
    assert await redis_store.queued_threads(limit=5) == threads[:5]
    assert await redis_store.queued_threads(limit=100) == threads

    keys = RedisKeys(prefix)
    client = redis_store.client
    emptied = threads[::3]
    for thread_id in emptied:
        await redis_store.clear_queue(thread_id)
    ghost_approval, ghost_run = index_member(f"tc_{uuid.uuid4().hex}", "ghost"), index_member("run_ghost", "ghost")
    await client.zadd(keys.index("open-approvals", "ghost"), {ghost_approval: time.time()})
    await client.zadd(keys.index("recent-runs", "ghost"), {ghost_run: time.time()})

    assert await redis_store.queued_threads(limit=100) == [t for t in threads if t not in emptied]
    for thread_id in emptied:
        assert await client.zscore(keys.index("queued-threads", thread_id), thread_id) is None
    assert await redis_store.open_approvals(limit=10) == []
    assert await client.zscore(keys.index("open-approvals", "ghost"), ghost_approval) is None
    assert "run_ghost" not in [run.run_id for run in await redis_store.recent_runs(limit=100)]
    assert await client.zscore(keys.index("recent-runs", "ghost"), ghost_run) is None


async def test_a_refused_enqueue_takes_its_id_back_and_a_lost_script_strands_nothing(
    redis_store: RedisStore, prefix: str
) -> None:
    keys = RedisKeys(prefix)
    client = redis_store.client
    missing = queued("nowhere")
    with pytest.raises(Exception, match="no thread"):
        await redis_store.enqueue_message(missing, limit=5)
    assert not await client.exists(keys.queued_index(missing.message_id))

    run, _ = await begin(redis_store, "full")
    await finish(redis_store, run)
    await redis_store.enqueue_message(queued("full"), limit=1)
    extra = queued("full")
    with pytest.raises(Exception, match="holds 1"):
        await redis_store.enqueue_message(extra, limit=1)
    assert not await client.exists(keys.queued_index(extra.message_id))
    assert await redis_store.queued_threads() == ["full"]  # the thread's entry stays: it holds a message

    # The script lost after its index entries were written: a reader drops the entry, nothing stuck.
    queues = redis_store._queues
    real = queues._send_ordered

    async def script_lost(first: Any, then: Any) -> tuple[list[Any], list[Any]]:
        done, _ = await real(first, [])
        return done, [ConnectionError("lost")] * len(then)

    queues._send_ordered = script_lost
    run, _ = await begin(redis_store, "lost")
    await finish(redis_store, run)
    with pytest.raises(Exception):  # noqa: B017 (the store's unavailable error)
        await redis_store.enqueue_message(queued("lost"), limit=5)
    queues._send_ordered = real
    assert await client.zscore(keys.index("queued-threads", "lost"), "lost") is not None
    assert await redis_store.queued_threads() == ["full"]
    assert await client.zscore(keys.index("queued-threads", "lost"), "lost") is None
    await redis_store.enqueue_message(queued("lost"), limit=5)
    assert await redis_store.queued_threads() == ["full", "lost"]


async def to_legacy(client: redis.Redis, prefix: str) -> dict[IndexName, dict[str, float]]:
    """Put every bucketed entry back in its index's old single key, as a store of the old layout had it."""
    keys = RedisKeys(prefix)
    old: dict[IndexName, dict[str, float]] = {}
    for name in INDEX_NAMES:
        entries: dict[str, float] = {}
        for key in keys.indexes(name):
            entries.update(await members(client, key))
            await client.delete(key)
        if entries:
            await client.zadd(keys.legacy_index(name), entries)
        old[name] = entries
    return old


async def test_the_old_single_key_indexes_migrate_to_their_buckets(redis_store: RedisStore, prefix: str) -> None:
    threads = spread(20, "m")
    lapsed = []
    records = []
    for k, thread_id in enumerate(threads):
        run, _ = await begin(redis_store, thread_id, ttl=0.05 if k < 3 else 30.0)
        if k < 3:
            lapsed.append((thread_id, run.run_id))
        record = approval(run, expires_in=-1 if k == 3 else 3600)
        records.append(record)
        await redis_store.write(thread_id, Batch(run=run, approvals=[record]))
        await redis_store.enqueue_message(queued(thread_id), limit=5)
    client = redis_store.client
    old = await to_legacy(client, prefix)
    total = sum(len(entries) for entries in old.values())
    assert total == 6 * len(threads)
    assert await redis_store.open_approvals() == []  # the readers see the buckets only

    # A bucket entry written since the buckets came keeps its later score.
    keys = RedisKeys(prefix)
    newer = time.time() + 500
    await client.zadd(keys.index("activity", threads[0]), {threads[0]: newer})

    moved = await asyncio.gather(*(redis_store._threads.migrate_legacy_indexes() for _ in range(2)))
    assert sum(moved) == total  # two at once move each entry once
    assert await redis_store._threads.migrate_legacy_indexes() == 0
    for name in INDEX_NAMES:
        assert not await client.exists(keys.legacy_index(name))
        layout = {m: s for key in keys.indexes(name) for m, s in (await members(client, key)).items()}
        assert set(layout) == set(old[name]), name
        for key, entries in (await where(client, prefix, name)).items():
            assert all(key == keys.index(name, thread_in(name, m)) for m in entries)
    assert await client.zscore(keys.index("activity", threads[0]), threads[0]) == newer

    expected = sorted(records, key=lambda a: (a.requested_ts, a.tool_call_id), reverse=True)
    assert [a.tool_call_id for a in await redis_store.open_approvals()] == [a.tool_call_id for a in expected]
    assert len(await redis_store.recent_runs(limit=100)) == len(threads)
    assert await redis_store.queued_threads(limit=100) == []  # all running
    await asyncio.sleep(0.1)  # the short leases lapse (wall clock: a lease is a time)
    assert sorted(await redis_store.expired_leases()) == sorted(lapsed)
    assert [a.tool_call_id for a in await redis_store.expired_approvals(time.time())] == [records[3].tool_call_id]


async def test_migration_pages_and_keeps_what_a_writer_changed(redis_store: RedisStore, prefix: str) -> None:
    keys = RedisKeys(prefix)
    client = redis_store.client
    legacy = keys.legacy_index("activity")
    entries = {f"p-{n}": float(n) for n in range(2500)}
    await client.zadd(legacy, entries)
    await client.zadd(keys.legacy_index("recent-runs"), {"not json": 1.0})  # names no thread: stays
    assert await redis_store._threads.migrate_legacy_indexes() == 2500
    moved = {m: s for key in keys.indexes("activity") for m, s in (await members(client, key)).items()}
    assert moved == entries
    assert not await client.exists(legacy)
    assert await members(client, keys.legacy_index("recent-runs")) == {"not json": 1.0}


async def test_on_a_cluster_readers_and_migration_cover_every_node(cluster: ClusterServers) -> None:
    prefix = f"test-{uuid.uuid4().hex[:8]}"
    store = RedisStore(cluster.url, prefix=prefix)
    try:
        await store.ping()
        threads = spread(16, "c")
        records = []
        for thread_id in threads:
            run, _ = await begin(store, thread_id)
            record = approval(run)
            records.append(record)
            await store.write(thread_id, Batch(run=run, approvals=[record]))
            await finish(store, run)
            await store.enqueue_message(queued(thread_id), limit=5)
        nodes = {await cluster.port_of(key) for key in RedisKeys(prefix).indexes("activity")}
        assert len(nodes) == 3

        seen: list[str] = []
        before = None
        while page := await store.open_approvals(before=before, limit=3):
            seen.extend(a.tool_call_id for a in page)
            before = (page[-1].requested_ts, page[-1].tool_call_id)
        expected = sorted(records, key=lambda a: (a.requested_ts, a.tool_call_id), reverse=True)
        assert seen == [a.tool_call_id for a in expected]
        assert await store.queued_threads(limit=100) == []  # each waits on its approval
        for record in records:
            await store.settle_approval(record.tool_call_id, status="rejected", decided_by="u1", via="web")
        assert await store.queued_threads(limit=100) == threads
        assert await store.idle_threads(time.time() + 60, limit=100) == threads
        assert len(await store.recent_runs(limit=100)) == len(threads)
        assert await store.delete_thread(threads[0])
        assert await store.queued_threads(limit=100) == threads[1:]

        # The old single keys (each on one node) move to the buckets on every node.
        client = store.client
        legacy = RedisKeys(prefix).legacy_index("activity")
        await client.zadd(legacy, {"old-thread": 5.0})
        assert await store._threads.migrate_legacy_indexes() == 1
        assert await client.zscore(RedisKeys(prefix).index("activity", "old-thread"), "old-thread") == 5.0
    finally:
        await store.aclose()  # the cluster is private: its keys go with it


async def test_many_pages_of_every_bucket_merge_exactly(redis_store: RedisStore, prefix: str) -> None:
    """Hundreds of entries per reader, written by hand: the merge reads many rounds and drops what lags."""
    rng = random.Random(18)
    keys = RedisKeys(prefix)
    client = redis_store.client
    pipe = client.pipeline(transaction=False)
    before_ts = 10_000.0
    idle: list[tuple[float, str]] = []
    ghosts, moved = [], []
    for n in range(400):
        thread_id = f"h-{n}"
        score = float(rng.randrange(0, 2000))  # ties across buckets
        kind = rng.random()
        pipe.zadd(keys.index("activity", thread_id), {thread_id: score})
        if kind < 0.1:
            ghosts.append(thread_id)  # no thread: dropped
            continue
        pipe.hset(keys.thread(thread_id, "thread"), mapping={"owner": "u1"})
        if kind < 0.2:
            moved.append(thread_id)  # written since: moved to its own time
            pipe.hset(keys.thread(thread_id, "thread"), "active", before_ts + 5)
        else:
            idle.append((score, thread_id))
    pending = []
    for n in range(300):
        thread_id = f"h-{n}"
        record = approval(new_run(thread_id)).model_copy(update={"requested_ts": float(rng.randrange(0, 100))})
        pipe.zadd(
            keys.index("open-approvals", thread_id), {index_member(record.tool_call_id, thread_id): record.requested_ts}
        )
        if rng.random() < 0.15:
            continue  # names no approval: dropped
        pipe.hset(keys.thread(thread_id, "approvals"), record.tool_call_id, approval_json(record))
        pending.append(record)
    await pipe.execute()

    expected = [thread_id for _, thread_id in sorted(idle)]
    for limit in (1, 7, 50, 1000):
        assert await redis_store.idle_threads(before_ts, limit=limit) == expected[:limit], limit
    for thread_id in ghosts:
        assert await client.zscore(keys.index("activity", thread_id), thread_id) is None
    for thread_id in moved:
        assert await client.zscore(keys.index("activity", thread_id), thread_id) == before_ts + 5

    newest = [a.tool_call_id for a in sorted(pending, key=lambda a: (a.requested_ts, a.tool_call_id), reverse=True)]
    for size in (1, 4, 25):
        seen: list[str] = []
        cursor = None
        while page := await redis_store.open_approvals(before=cursor, limit=size):
            seen.extend(a.tool_call_id for a in page)
            cursor = (page[-1].requested_ts, page[-1].tool_call_id)
        assert seen == newest, size
    left = sum([await client.zcard(key) for key in keys.indexes("open-approvals")])
    assert left == len(pending)


async def test_a_store_migrates_the_old_indexes_when_it_is_first_pinged(redis_url: str, prefix: str) -> None:
    writer = RedisStore(redis_url, prefix=prefix)
    try:
        thread_id = spread(1, "ping")[0]
        run, _ = await begin(writer, thread_id, ttl=0.05)
        await to_legacy(writer.client, prefix)
        await asyncio.sleep(0.1)
        assert await writer.expired_leases() == []  # the bucket is empty: the entry sits in the old key
    finally:
        await writer.aclose()
    upgraded = RedisStore(redis_url, prefix=prefix)
    try:
        await upgraded.ping()
        assert await upgraded.expired_leases() == [(thread_id, run.run_id)]
        assert not await upgraded.client.exists(RedisKeys(prefix).legacy_index("leases"))
    finally:
        await upgraded.aclose()
        await drop_prefix(redis_url, prefix)


async def test_an_owners_old_single_key_list_moves_into_its_buckets_when_first_listed(
    redis_store: RedisStore, prefix: str
) -> None:
    threads = spread(12, "own")
    for thread_id in threads:
        await begin(redis_store, thread_id)
    keys, client = RedisKeys(prefix), redis_store.client
    entries: dict[str, float] = {}
    for key in keys.owner_lists("u1"):
        entries.update(await members(client, key))
        await client.delete(key)
    assert set(entries) == set(threads)
    await client.zadd(keys.legacy_owner_threads("u1"), entries)  # as an earlier version kept it

    fresh = RedisStore(redis_store.client, prefix=prefix)  # a process that has not listed this owner yet
    try:
        listed = await fresh.list_threads("u1", limit=100)
    finally:
        await fresh.aclose()
    assert [line.thread_id for line in listed] == sorted(threads, key=lambda t: (entries[t], t), reverse=True)
    assert not await client.exists(keys.legacy_owner_threads("u1"))
    assert {m for key in keys.owner_lists("u1") for m in await members(client, key)} == set(threads)
