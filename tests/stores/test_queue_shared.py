"""The queue of a shared store (Redis, SQLite, PostgreSQL): several clients on the same data, and a restart.

Each store object here is another client of the same data, as another gateway process is: its
own connections (SQLite: its own writer thread on the file), its own caches.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from gateway import QueuedMessageNotFoundError, QueueFullError, StoreUnavailableError, ThreadBusyError
from gateway.stores import PostgresStore, RedisStore, SqliteStore, Store

from ..conftest import drop_prefix, drop_schema
from ._helpers import begin, finish
from ._server import RedisServer
from .test_queue import begin_queued, queued

Clients = Callable[[], Store]


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
async def clients(request: pytest.FixtureRequest, tmp_path: Path, prefix: str) -> AsyncIterator[Clients]:
    """Makes stores on the same data, each a client of its own; closes them and drops the data after."""
    made: list[Store] = []
    schema = f"test_{uuid.uuid4().hex[:12]}"
    if request.param == "redis":
        url: str = request.getfixturevalue("redis_url")

        def make() -> Store:
            return RedisStore(url, prefix=prefix)
    elif request.param == "sqlite":

        def make() -> Store:
            return SqliteStore(tmp_path / "agora.db")
    else:
        dsn: str = request.getfixturevalue("postgres_dsn")

        def make() -> Store:
            return PostgresStore(dsn, schema=schema)

    def new() -> Store:
        store = make()
        made.append(store)
        return store

    try:
        yield new
    finally:
        for store in made:
            await store.aclose()
        if request.param == "redis":
            await drop_prefix(url, prefix)
        elif request.param == "postgres":
            await drop_schema(dsn, schema)


async def test_two_clients_dequeuing_the_same_head_start_it_once(clients: Clients, thread_id: str) -> None:
    a, b = clients(), clients()
    run, _ = await begin(a, thread_id)
    items = [queued(thread_id, f"m{k}") for k in range(4)]
    for item in items:
        await b.enqueue_message(item, limit=20)
    for index, item in enumerate(items):
        await finish(a, run)
        results = await asyncio.gather(
            begin_queued(a, thread_id, item.message_id),
            begin_queued(b, thread_id, item.message_id),
            return_exceptions=True,
        )
        started = [r for r in results if isinstance(r, str)]
        assert len(started) == 1, results
        [loser] = [r for r in results if not isinstance(r, str)]
        assert isinstance(loser, ThreadBusyError | QueuedMessageNotFoundError), loser
        for store in (a, b):
            assert await store.queued_messages(thread_id) == items[index + 1 :]
            assert await store.get_queued(item.message_id) is None
        stored = await b.get_run(started[0])
        assert stored is not None and stored.status == "running"
        run = stored
    await finish(a, run)
    assert thread_id not in await b.queued_threads()
    assert [r.status for r in await a.thread_runs(thread_id)] == ["completed"] * 5


async def test_the_limit_holds_under_concurrent_enqueues(clients: Clients, thread_id: str) -> None:
    stores = [clients() for _ in range(3)]
    await begin(stores[0], thread_id)
    items = [queued(thread_id, f"m{k}") for k in range(12)]
    results = await asyncio.gather(
        *(stores[k % 3].enqueue_message(item, limit=4) for k, item in enumerate(items)), return_exceptions=True
    )
    positions = sorted(r for r in results if isinstance(r, int))
    assert positions == [1, 2, 3, 4], results
    assert all(isinstance(r, QueueFullError) for r in results if not isinstance(r, int))
    by_position = {r: item.message_id for item, r in zip(items, results, strict=True) if isinstance(r, int)}
    held = await stores[1].queued_messages(thread_id)
    assert [q.message_id for q in held] == [by_position[p] for p in positions]  # each where its answer said
    for item, result in zip(items, results, strict=True):
        assert (await stores[2].get_queued(item.message_id) is None) == isinstance(result, QueueFullError)


async def test_a_message_queued_while_the_run_finishes_waits_at_the_head(clients: Clients) -> None:
    a, b = clients(), clients()
    for _ in range(6):
        thread_id = f"t-{uuid.uuid4().hex[:10]}"
        run, _ = await begin(a, thread_id)
        item = queued(thread_id)
        await asyncio.gather(finish(a, run), b.enqueue_message(item, limit=20))
        assert await a.queued_messages(thread_id) == [item]
        assert thread_id in await a.queued_threads(limit=1000)
        with pytest.raises(ThreadBusyError):  # a new message does not jump the queue
            await begin(b, thread_id)
        started = await begin_queued(b, thread_id, item.message_id)
        stored = await a.get_run(started)
        assert stored is not None and stored.status == "running"
        assert await a.queued_messages(thread_id) == []


async def test_the_releasing_client_reads_what_was_queued_before_its_release_and_others_what_came_after(
    clients: Clients, thread_id: str
) -> None:
    a, b = clients(), clients()
    run, _ = await begin(a, thread_id)
    item = queued(thread_id)
    await b.enqueue_message(item, limit=20)
    await finish(a, run)
    assert await a.queued_messages(thread_id) == [item]  # the drain after the release finds it
    started = await a.get_run(await begin_queued(a, thread_id, item.message_id))
    assert started is not None
    await finish(a, started)
    later = queued(thread_id, "later")
    await b.enqueue_message(later, limit=20)  # after the release: its sender drains it
    assert await asyncio.create_task(a.queued_messages(thread_id)) == [later]  # any other read asks
    assert await a.queued_messages(thread_id) == [later]


async def test_a_new_message_racing_an_enqueue_never_runs_before_it(clients: Clients) -> None:
    a, b = clients(), clients()
    for _ in range(6):
        thread_id = f"t-{uuid.uuid4().hex[:10]}"
        run, _ = await begin(a, thread_id)
        await finish(a, run)
        item = queued(thread_id)
        began, position = await asyncio.gather(
            begin(a, thread_id), b.enqueue_message(item, limit=20), return_exceptions=True
        )
        assert position == 1
        # Either the begin came first (the message queues behind its run) or it found the queue.
        assert isinstance(began, tuple) or isinstance(began, ThreadBusyError), began
        assert await b.queued_messages(thread_id) == [item]


async def test_the_queue_survives_a_reopen(clients: Clients, thread_id: str) -> None:
    first = clients()
    run, _ = await begin(first, thread_id)
    a, b = queued(thread_id, "a"), queued(thread_id, "b")
    await first.enqueue_message(a, limit=20)
    await first.enqueue_message(b, limit=20, first=True)
    await finish(first, run)
    await first.aclose()
    again = clients()  # the store object of a restarted process
    assert await again.queued_messages(thread_id) == [b, a]
    assert await again.get_queued(a.message_id) == a
    assert thread_id in await again.queued_threads(limit=1000)
    with pytest.raises(ThreadBusyError):
        await begin(again, thread_id)
    with pytest.raises(QueuedMessageNotFoundError):
        await begin_queued(again, thread_id, a.message_id)
    await begin_queued(again, thread_id, b.message_id)
    assert await again.queued_messages(thread_id) == [a]


@pytest.mark.redis
async def test_a_queue_survives_a_killed_redis_and_its_calls_fail_meanwhile(server: RedisServer, prefix: str) -> None:
    await server.start()
    store = RedisStore(server.url, prefix=prefix, timeout=2.0)
    try:
        thread_id = "t-killed"
        run, _ = await begin(store, thread_id)
        a, b = queued(thread_id, "a"), queued(thread_id, "b")
        await store.enqueue_message(a, limit=5)
        await store.enqueue_message(b, limit=5)
        server.kill()  # SIGKILL: the AOF (appendfsync always) has every write
        for call in (
            lambda: store.enqueue_message(queued(thread_id), limit=5),
            lambda: store.queued_messages(thread_id),
            lambda: store.remove_queued(a.message_id),
            lambda: begin_queued(store, thread_id, a.message_id),
        ):
            with pytest.raises(StoreUnavailableError):
                await call()
        await server.start()
        assert await store.queued_messages(thread_id) == [a, b]
        await finish(store, run)
        await begin_queued(store, thread_id, a.message_id)
        assert await store.queued_messages(thread_id) == [b]
        assert await store.get_queued(a.message_id) is None
    finally:
        await store.aclose()
