"""What only ``RedisStore`` promises: key layout, errors, one pub/sub connection, surviving restarts."""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import redis.asyncio as redis
from redis import __version__ as redis_version
from redis.crc import key_slot

from gateway import StoreUnavailableError, ThreadNotFoundError
from gateway.events import RunEvent
from gateway.models import UserMessage
from gateway.stores import Batch, ModelStepEntry, RedisStore
from gateway.stores._redis_batch import CommandBatcher
from gateway.stores._redis_client import redact
from gateway.stores._redis_layout import PENDING_HEAD, IndexName, RedisKeys, approval_head
from gateway.stores._redis_scripts import ERASE, SETTLE

from ._helpers import approval, begin, collect, delta, eventually, finish, new_run, thread_of
from ._server import RedisServer, SentinelServer, free_port
from .conftest import drop_prefix
from .test_queue import begin_queued, queued

pytestmark = pytest.mark.redis
REDIS_MAJOR = int(redis_version.split(".")[0])


async def test_a_threads_keys_share_its_hash_tag(redis_store: RedisStore, redis_url: str, prefix: str) -> None:
    thread_id = "odd:thread}{id"
    run, _ = await begin(redis_store, thread_id)
    record = approval(run)
    await redis_store.write(thread_id, Batch(run=run, approvals=[record], journal=[]))
    await redis_store.settle_approval(record.tool_call_id, status="approved", decided_by="u1", via="web", remember=True)
    item = queued(thread_id)
    await redis_store.enqueue_message(item, limit=5)
    await finish(redis_store, run)
    await redis_store.channel_set("k", 1)

    client = redis.Redis.from_url(redis_url)
    try:
        keys = sorted([key.decode() async for key in client.scan_iter(match=f"{prefix}:*")])
    finally:
        await client.aclose()
    thread_keys = [key for key in keys if key.startswith(f"{prefix}:{{")]
    assert {key.rpartition("}:")[2] for key in thread_keys} >= {
        "thread", "events", "runs", "run-order", "approvals", "remembered", "queue", "queued",
    }  # fmt: skip
    assert all(key.startswith(f"{prefix}:{{{thread_id}}}:") for key in thread_keys)
    assert len({key_slot(key.encode()) for key in thread_keys}) == 1
    owner = hashlib.sha256(b"u1").hexdigest()
    assert RedisKeys(prefix).owner_threads("u1", thread_id).startswith(f"{prefix}:owner:{owner}:{{")
    bucket = RedisKeys(prefix).index  # the thread's bucket of each global index
    assert set(keys) - set(thread_keys) == {
        f"{prefix}:run:{run.run_id}",
        f"{prefix}:approval:{record.tool_call_id}",
        bucket("leases", thread_id),
        f"{prefix}:channel:k",
        bucket("activity", thread_id),
        RedisKeys(prefix).owner_threads("u1", thread_id),
        bucket("recent-runs", thread_id),
        f"{prefix}:queued:{item.message_id}",
        bucket("queued-threads", thread_id),
    }


def test_the_prefix_cannot_hold_braces() -> None:
    with pytest.raises(ValueError, match="braces"):
        RedisStore("redis://127.0.0.1:6379/0", prefix="a{b}")


def test_urls_are_redacted() -> None:
    assert redact("redis://user:s3cret@host:6379/0") == "redis://user:***@host:6379/0"
    assert redact("rediss://:s3cret@host:6380") == "rediss://:***@host:6380"
    assert redact("unix:///run/redis.sock?db=1&password=s3cret") == "unix:///run/redis.sock?db=1&password=***"
    assert redact("redis://host:6379/0") == "redis://host:6379/0"


async def test_ping_names_the_url_without_its_password_when_redis_is_down() -> None:
    port = free_port()
    store = RedisStore(f"redis://agora:s3cret@127.0.0.1:{port}/0", prefix="down")
    try:
        with pytest.raises(StoreUnavailableError) as caught:
            await store.ping()
        message = str(caught.value)
        assert f"127.0.0.1:{port}" in message and "s3cret" not in message
        assert isinstance(caught.value.__cause__, redis.ConnectionError)
        with pytest.raises(StoreUnavailableError):
            await store.get_thread("t1")
        with pytest.raises(StoreUnavailableError):
            await store.write("t1", Batch())
    finally:
        await store.aclose()


async def test_the_queue_and_the_staff_lists_raise_store_unavailable_when_redis_is_down() -> None:
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", prefix="down")
    item = queued("t1")
    calls = [
        lambda: store.enqueue_message(item, limit=5),
        lambda: store.queued_messages("t1"),
        lambda: store.get_queued(item.message_id),
        lambda: store.update_queued(item.message_id, first=True),
        lambda: store.remove_queued(item.message_id),
        lambda: store.clear_queue("t1"),
        lambda: store.queued_threads(),
        lambda: store.open_approvals(),
        lambda: store.recent_runs(),
        lambda: begin_queued(store, "t1", item.message_id),
    ]
    try:
        for call in calls:
            with pytest.raises(StoreUnavailableError) as caught:
                await call()
            assert isinstance(caught.value.__cause__, redis.ConnectionError)
    finally:
        await store.aclose()


async def test_subscribing_when_redis_is_down_raises() -> None:
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", prefix="down", subscribe_timeout=0.2)
    try:
        with pytest.raises(StoreUnavailableError):
            async with asyncio.timeout(5):
                await anext(aiter(store.subscribe("t1")))
        assert store.hub.subscribers(store.channel("t1")) == 0
    finally:
        await store.aclose()


async def test_a_caller_supplied_client_is_left_open(redis_url: str, prefix: str) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    store = RedisStore(client, prefix=prefix)
    try:
        thread_id = f"t-{uuid.uuid4().hex[:8]}"
        run, _ = await begin(store, thread_id)
        got = await collect(store.subscribe(thread_id), 1)
        assert got[0].run_id == run.run_id
        assert [r.run_id for r in await store.thread_runs(thread_id)] == [run.run_id]
        assert repr(store).startswith("RedisStore('redis://127.0.0.1:")
        await store.aclose()
        assert await client.ping()
    finally:
        await drop_prefix(redis_url, prefix)
        await client.aclose()


async def test_thousands_of_subscribers_share_one_pubsub_connection(server: RedisServer, prefix: str) -> None:
    await server.start()
    store = RedisStore(server.url, prefix=prefix)
    admin = redis.Redis.from_url(server.url)
    try:
        streams = [store.subscribe(f"t{i % 200}") for i in range(1000)]
        async with asyncio.timeout(10):
            readers = [asyncio.create_task(collect(stream, 1)) for stream in streams]
            await eventually(lambda: _numsub(admin, store, 200))
            runs = [(await begin(store, f"t{i}"))[0] for i in range(200)]
            results = await asyncio.gather(*readers)
        assert all(result[0].run_id == runs[i % 200].run_id for i, result in enumerate(results))
        clients = (await admin.execute_command("CLIENT", "LIST", "TYPE", "pubsub")).decode()
        assert len(clients.strip().splitlines()) == 1
        for stream in streams:
            await stream.aclose()  # type: ignore[attr-defined]
        await eventually(lambda: _numsub(admin, store, 0))  # the last reader of each thread left
    finally:
        await store.aclose()
        await admin.aclose()


async def _numsub(admin: redis.Redis, store: RedisStore, threads: int) -> bool:
    channels = [store.channel(f"t{i}") for i in range(200)]
    counts = await admin.pubsub_numsub(*channels)
    return sum(count for _, count in counts) == threads


async def test_scripts_are_reloaded_after_redis_forgets_them(server: RedisServer, prefix: str) -> None:
    await server.start()
    store = RedisStore(server.url, prefix=prefix)
    try:
        run, _ = await begin(store, "t1")
        await store.client.script_flush()
        await store.write("t1", Batch(events=[delta(run)]))  # a lone script call
        await store.client.script_flush()
        record = approval(run)
        await store.write("t1", Batch(run=run, approvals=[record]))  # a script in a pipeline
        assert await store.last_seq("t1") == 2
        assert await store.get_approval(record.tool_call_id) == record
    finally:
        await store.aclose()


async def test_a_turn_begun_after_redis_forgot_its_scripts_sees_its_own_message(
    server: RedisServer, prefix: str
) -> None:
    await server.start()
    store = RedisStore(server.url, prefix=prefix)
    try:
        run, _ = await begin(store, "t1", batch=Batch(messages=[UserMessage(content="first")]))
        await finish(store, run)
        await store.client.script_flush()
        second = new_run("t1")
        begun = await store.begin_run(
            second,
            thread=thread_of("t1"),
            batch=Batch(messages=[UserMessage(content="second")]),
            lease_owner="p1",
            lease_ttl=30,
        )
        # The history is read in the script's pipeline: it must be read after the script ran.
        assert begun.history == [UserMessage(content="first"), UserMessage(content="second")]
        assert await store.get_messages("t1") == begun.history
    finally:
        await store.aclose()


async def test_a_restarted_redis_is_used_again_and_live_tails_lose_nothing(server: RedisServer, prefix: str) -> None:
    await server.start()
    store = RedisStore(server.url, prefix=prefix)
    got: list[RunEvent] = []
    try:
        run, _ = await begin(store, "t1")
        await store.write("t1", Batch(events=[delta(run, "before")]))
        consumer = asyncio.create_task(collect(store.subscribe("t1"), 6, got))
        await eventually(lambda: _has(got, 2))

        server.kill()
        with pytest.raises(StoreUnavailableError):
            await store.write("t1", Batch(events=[delta(run, "lost")]))
        with pytest.raises(StoreUnavailableError):
            await store.read_events("t1")

        await server.start()
        await store.write("t1", Batch(events=[delta(run, "after-1"), delta(run, "after-2")]))
        await eventually(lambda: _true(store.hub.connected))
        await store.write("t1", Batch(events=[delta(run, "after-3"), delta(run, "after-4")]))
        async with asyncio.timeout(10):
            await consumer
        assert [e.seq for e in got] == [1, 2, 3, 4, 5, 6]
        assert [getattr(e, "delta", None) for e in got[1:]] == ["before", "after-1", "after-2", "after-3", "after-4"]
        assert store.hub.reconnections >= 1
        await store.ping()
    finally:
        await store.aclose()


async def _has(events: list[RunEvent], count: int) -> bool:
    return len(events) >= count


async def _true(value: bool) -> bool:
    return value


async def test_a_silent_redis_fails_calls_at_their_deadline(server: RedisServer, prefix: str) -> None:
    await server.start()
    store = RedisStore(server.url, prefix=prefix, timeout=0.2)
    try:
        await begin(store, "t1")
        assert server.process is not None
        server.process.send_signal(signal.SIGSTOP)  # alive, but answers nothing
        try:
            with pytest.raises(StoreUnavailableError, match="did not answer within 0.2 s"):
                await store.last_seq("t1")
        finally:
            server.process.send_signal(signal.SIGCONT)
        assert await store.last_seq("t1") == 1
    finally:
        await store.aclose()


async def test_a_sentinel_url_works_like_a_plain_one(server: RedisServer, tmp_path: Path, prefix: str) -> None:
    await server.start()
    sentinel = SentinelServer(tmp_path, server)
    await sentinel.start()
    store = RedisStore(sentinel.url, prefix=prefix)
    try:
        await store.ping()
        run, _ = await begin(store, "t1")
        stream = store.subscribe("t1")
        async with asyncio.timeout(5):
            got = await collect(stream, 1)
            await store.write("t1", Batch(events=[delta(run, "via sentinel")]))
            await collect(stream, 2, got)
        await stream.aclose()  # type: ignore[attr-defined]
        assert [e.seq for e in got] == [1, 2]
        assert repr(store) == f"RedisStore('{sentinel.url}', prefix='{prefix}')"
    finally:
        await store.aclose()
        sentinel.kill()


async def _follow_through(
    store: RedisStore,
    tail: AsyncIterator[RunEvent],
    admin_action: Callable[[], Awaitable[None]],
    *,
    recovered: Callable[[], bool],
) -> list[RunEvent]:
    """Follow ``tail`` of thread t1, disturb the pub/sub connection, write on; return what the tail saw.

    The caller holds the tail and closes it: one dropped unclosed ends whenever it is collected.
    """
    got: list[RunEvent] = []
    run, _ = await begin(store, "t1")
    consumer = asyncio.create_task(collect(tail, 5, got))
    await eventually(lambda: _has(got, 1))
    await store.write("t1", Batch(events=[delta(run, "before")]))
    await eventually(lambda: _has(got, 2))
    await admin_action()
    await store.write("t1", Batch(events=[delta(run, "during")]))
    await eventually(lambda: _true(recovered()))
    await store.write("t1", Batch(events=[delta(run, "after-1"), delta(run, "after-2")]))
    async with asyncio.timeout(10):
        await consumer
    return got


async def test_a_killed_pubsub_connection_is_replaced_without_loss(server: RedisServer, prefix: str) -> None:
    """redis-py's retry reconnects and resubscribes unasked (6 and later): the unexpected acks make tails re-read."""
    await server.start()
    store = RedisStore(server.url, prefix=prefix)
    admin = redis.Redis.from_url(server.url)
    try:

        async def kill_pubsub() -> None:
            await admin.execute_command("CLIENT", "KILL", "TYPE", "pubsub")

        tail = store.subscribe("t1")
        got = await _follow_through(
            store, tail, kill_pubsub, recovered=lambda: store.hub.subscribers(store.channel("t1")) == 1
        )
        assert [e.seq for e in got] == [1, 2, 3, 4, 5]
        # redis-py 6 and later reconnect and resubscribe by themselves; with 5.x the hub does.
        assert store.hub.reconnections == (1 if REDIS_MAJOR < 6 else 0)
        await eventually(lambda: _numsub_of(admin, store.channel("t1"), 1))  # one subscription, none doubled
        await tail.aclose()  # type: ignore[attr-defined]
        await eventually(lambda: _numsub_of(admin, store.channel("t1"), 0))
    finally:
        await store.aclose()
        await admin.aclose()


async def test_a_frozen_redis_is_noticed_by_the_heartbeat(server: RedisServer, prefix: str) -> None:
    await server.start()
    store = RedisStore(server.url, prefix=prefix, heartbeat=0.05)
    assert server.process is not None
    process = server.process
    try:

        async def freeze_then_thaw() -> None:
            process.send_signal(signal.SIGSTOP)
            try:
                await eventually(lambda: _true(not store.hub.connected))
            finally:
                process.send_signal(signal.SIGCONT)

        tail = store.subscribe("t1")
        got = await _follow_through(store, tail, freeze_then_thaw, recovered=lambda: store.hub.connected)
        await tail.aclose()  # type: ignore[attr-defined]
        assert [e.seq for e in got] == [1, 2, 3, 4, 5]
        assert store.hub.reconnections >= 1
    finally:
        await store.aclose()


async def _numsub_of(admin: redis.Redis, channel: bytes, expected: int) -> bool:
    return dict(await admin.pubsub_numsub(channel)).get(channel) == expected


async def test_a_refused_write_leaves_no_index_behind(redis_store: RedisStore, redis_url: str, prefix: str) -> None:
    run, _ = await begin(redis_store, "t1")
    orphan = approval(run).model_copy(update={"thread_id": "nowhere"})
    with pytest.raises(ThreadNotFoundError):
        await redis_store.write("nowhere", Batch(approvals=[orphan]))
    client = redis.Redis.from_url(redis_url)
    try:
        keys = {key.decode() async for key in client.scan_iter(match=f"{prefix}:*")}
    finally:
        await client.aclose()
    assert not any("nowhere" in key or orphan.tool_call_id in key for key in keys)
    client = redis_store.client
    for name in ("approval-expiry", "open-approvals"):
        assert await client.zcard(RedisKeys(prefix).index(name, "nowhere")) == 0, name


async def test_a_write_sent_twice_is_applied_once(redis_store: RedisStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """redis-py resends a command whose reply was lost; the write's id makes the second a no-op."""
    run, _ = await begin(redis_store, "t1")
    record = approval(run)
    fixed = uuid.uuid4()
    monkeypatch.setattr(uuid, "uuid4", lambda: fixed)
    batch = Batch(run=run, events=[delta(run, "once"), delta(run, "only")], messages=[], approvals=[record])
    first = await redis_store.write("t1", batch)
    again = await redis_store.write("t1", batch)
    monkeypatch.undo()
    assert [e.seq for e in first] == [e.seq for e in again] == [2, 3]
    assert await redis_store.last_seq("t1") == 3
    assert [a.tool_call_id for a in await redis_store.pending_approvals("t1")] == [record.tool_call_id]
    later = await redis_store.write("t1", Batch(events=[delta(run, "next")]))
    assert [e.seq for e in later] == [4]


async def test_a_decision_sent_twice_is_still_the_winner(redis_store: RedisStore) -> None:
    run, _ = await begin(redis_store, "t1")
    record = approval(run)
    await redis_store.write("t1", Batch(run=run, approvals=[record]))
    keys = [redis_store._keys.thread("t1", name) for name in ("approvals", "pending", "remembered")]
    head = approval_head(status="approved", decided_by="u1", via="web", reason=None, decided_at="now", remember=False)
    args = [record.tool_call_id, PENDING_HEAD, head, "0"]
    first = await SETTLE(redis_store._call, keys, args)
    assert first is not None
    assert await SETTLE(redis_store._call, keys, args) == first
    other = head.replace('"u1"', '"u2"')
    assert await SETTLE(redis_store._call, keys, [record.tool_call_id, PENDING_HEAD, other, "0"]) is None


async def test_concurrent_calls_share_pipelines(redis_store: RedisStore) -> None:
    run, _ = await begin(redis_store, "t1")
    await redis_store.write("t1", Batch(events=[delta(run)]))
    before = redis_store._batcher.pipelines
    answers = await asyncio.gather(*(redis_store.last_seq("t1") for _ in range(50)))
    assert answers == [2] * 50
    assert redis_store._batcher.pipelines > before


async def test_the_batcher_keeps_to_its_connection_budget(redis_store: RedisStore) -> None:
    batcher = CommandBatcher(redis_store.client, max_in_flight=1, max_batch=3)
    try:
        keys = [f"{redis_store.prefix}:budget:{i}" for i in range(20)]
        await asyncio.gather(*(batcher.call("SET", key, i) for i, key in enumerate(keys)))
        values = await asyncio.gather(*(batcher.call("GET", key) for key in keys))
        assert [int(v) for v in values] == list(range(20))
        assert batcher.pipelines >= 6
        with pytest.raises(redis.ResponseError):
            await batcher.call("INCR", keys[0], "too", "many")
    finally:
        await batcher.aclose()
    with pytest.raises(RuntimeError):
        await batcher.call("PING")


async def test_one_sends_commands_stay_in_one_pipeline_past_the_batch_size(redis_store: RedisStore) -> None:
    # Two pipelines in flight at once run in any order: a send's later read must see its writes.
    batcher = CommandBatcher(redis_store.client, max_in_flight=4, max_batch=2)
    try:
        key = f"{redis_store.prefix}:ordered"
        blocker = asyncio.ensure_future(batcher.call("PING"))  # makes the sends below queue up
        sends = [
            batcher.send([("RPUSH", f"{key}:{n}", "a"), ("RPUSH", f"{key}:{n}", "b"), ("LRANGE", f"{key}:{n}", 0, -1)])
            for n in range(20)
        ]
        replies = await asyncio.gather(*sends)
        await blocker
        assert all(reply[2] == [b"a", b"b"] for reply in replies)
        assert batcher.pipelines >= 10
    finally:
        await batcher.aclose()


async def test_a_script_redis_forgot_is_loaded_by_the_batcher_and_sent_again(server: RedisServer) -> None:
    from gateway.stores._redis_scripts import RENEW

    await server.start()  # a private server: its script cache is flushed, never the shared one's
    client = redis.Redis.from_url(server.url)
    batcher = CommandBatcher(client)
    try:
        await batcher.call("SET", "lease", "me")
        await client.script_flush()
        replies = await batcher.send([RENEW.command(["lease"], ["me", 5000]), ("PTTL", "lease")])
        assert replies[0] == 1 and 0 < replies[1] <= 5000, replies
    finally:
        await batcher.aclose()
        await client.aclose()


async def test_a_call_given_up_mid_reply_leaves_the_connection_in_step(redis_store: RedisStore) -> None:
    key = f"{redis_store.prefix}:blocked"
    batcher = CommandBatcher(redis_store.client, max_in_flight=1)
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await batcher.call("BLPOP", key, 2)
        # Reused as it was, the connection would answer the next call with the BLPOP's reply.
        assert await batcher.call("RPUSH", key, "late") == 1
        assert await batcher.call("LRANGE", key, 0, -1) == [b"late"]
    finally:
        await batcher.aclose()


async def test_a_failing_command_fails_alone_and_bad_arguments_send_nothing(redis_store: RedisStore) -> None:
    key = f"{redis_store.prefix}:mixed"
    batcher = CommandBatcher(redis_store.client)
    try:
        set_reply, incr_reply, get_reply = await batcher.send([("SET", key, "v"), ("INCR", key), ("GET", key)])
        assert set_reply == b"OK" and get_reply == b"v"
        assert isinstance(incr_reply, redis.ResponseError) and "not an integer" in str(incr_reply)
        with pytest.raises(redis.DataError, match="SET"):
            await batcher.call("SET", f"{key}:none", None)
        assert await batcher.call("EXISTS", f"{key}:none") == 0
    finally:
        await batcher.aclose()


async def _members(client: redis.Redis, key: str) -> set[str]:
    return {member.decode() for member in await client.zrange(key, 0, -1)}


async def _index_members(client: redis.Redis, prefix: str, name: IndexName) -> set[str]:
    """The members of every bucket of a global index."""
    return {member for key in RedisKeys(prefix).indexes(name) for member in await _members(client, key)}


async def test_erasure_leaves_no_key_of_the_thread_behind(redis_store: RedisStore, redis_url: str, prefix: str) -> None:
    run, _ = await begin(redis_store, "gone")
    record, lapsed = approval(run), approval(run, expires_in=-1)
    entry = ModelStepEntry(step=0, message_id="m1", text="x")
    await redis_store.write("gone", Batch(run=run, approvals=[record, lapsed], journal=[entry], events=[delta(run)]))
    await redis_store.settle_approval(record.tool_call_id, status="approved", decided_by="u1", via="web", remember=True)
    kept, _ = await begin(redis_store, "kept")
    await redis_store.rename_thread("gone", "a name")

    assert await redis_store.delete_thread("gone") is True

    client = redis.Redis.from_url(redis_url)
    try:
        keys = {key.decode() async for key in client.scan_iter(match=f"{prefix}:*")}
        assert not [key for key in keys if "gone" in key or run.run_id in key or record.tool_call_id in key]
        assert not [key for key in keys if lapsed.tool_call_id in key]
        assert await _index_members(client, prefix, "activity") == {"kept"}
        owner_lists = RedisKeys(prefix).owner_lists("u1")
        assert {member for key in owner_lists for member in await _members(client, key)} == {"kept"}
        leases = await _index_members(client, prefix, "leases")
        assert leases == {json.dumps(["kept", kept.run_id], separators=(",", ":"))}
        assert await _index_members(client, prefix, "approval-expiry") == set()
        assert await _index_members(client, prefix, "open-approvals") == set()
        assert await _index_members(client, prefix, "recent-runs") == {
            json.dumps([kept.run_id, "kept"], separators=(",", ":"))
        }
    finally:
        await client.aclose()


async def test_index_entries_that_name_no_thread_are_dropped_by_their_readers(
    redis_store: RedisStore, prefix: str
) -> None:
    """What a process that died between erasing a thread's keys and its index entries leaves."""
    await begin(redis_store, "alive")
    owner_index = RedisKeys(prefix).owner_threads("u1", "ghost")
    await redis_store.client.zadd(owner_index, {"ghost": time.time() + 5})
    activity = RedisKeys(prefix).index
    await redis_store.client.zadd(activity("activity", "ghost"), {"ghost": 1.0})
    # An activity entry behind the thread's own time (its index write was lost) is moved, not taken.
    await redis_store.client.zadd(activity("activity", "alive"), {"alive": 2.0})

    assert [line.thread_id for line in await redis_store.list_threads("u1")] == ["alive"]
    assert await redis_store.client.zscore(owner_index, "ghost") is None
    assert await redis_store.idle_threads(time.time() - 60) == []
    assert await redis_store.client.zscore(activity("activity", "ghost"), "ghost") is None
    assert (await redis_store.client.zscore(activity("activity", "alive"), "alive") or 0) > time.time() - 60
    assert await redis_store.idle_threads(time.time() + 60) == ["alive"]


async def test_erasing_refuses_when_the_runs_changed_since_they_were_read(redis_store: RedisStore) -> None:
    run, _ = await begin(redis_store, "busy")
    keys = redis_store._threads._erased_keys("busy", [])
    assert await ERASE(redis_store.client.execute_command, keys, []) == -1  # a run it was not told of
    assert await redis_store.get_run(run.run_id) is not None
    assert await redis_store.delete_thread("busy") is True
