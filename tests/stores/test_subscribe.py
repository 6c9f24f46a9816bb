"""Contract: live tails (``subscribe``), both stores."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.events import RunEvent
from gateway.stores import Batch, Store, _tail

from ._helpers import begin, collect, delta, eventually, live_subscribers


async def test_backlog_then_live_events(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    await store.write(thread_id, Batch(events=[delta(run, "a"), delta(run, "b")]))
    stream = store.subscribe(thread_id, after_seq=1)
    got: list[RunEvent] = []
    async with asyncio.timeout(5):
        await collect(stream, 2, got)
        assert [e.seq for e in got] == [2, 3]
        await store.write(thread_id, Batch(events=[delta(run, "c"), delta(run, "d")]))
        await collect(stream, 4, got)
    await stream.aclose()  # type: ignore[attr-defined]
    assert [e.seq for e in got] == [2, 3, 4, 5]
    assert [e.delta for e in got] == ["a", "b", "c", "d"]  # type: ignore[union-attr]


async def test_a_subscriber_before_the_thread_exists_sees_everything(store: Store, thread_id: str) -> None:
    got: list[RunEvent] = []
    consumer = asyncio.create_task(collect(store.subscribe(thread_id), 4, got))
    await eventually(lambda: _true(live_subscribers(store, thread_id) == 1))
    run, _ = await begin(store, thread_id)
    await store.write(thread_id, Batch(events=[delta(run, "a"), delta(run, "b")]))
    await store.write(thread_id, Batch(events=[delta(run, "c")]))
    async with asyncio.timeout(5):
        await consumer
    assert [e.seq for e in got] == [1, 2, 3, 4]
    assert got[0].type == "run-started"


async def test_no_gaps_or_duplicates_with_concurrent_writers(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    total = 1 + 4 * 15 * 2
    got: list[RunEvent] = []
    consumers = [asyncio.create_task(collect(store.subscribe(thread_id, after), total - after)) for after in (0, 1)]
    late = store.subscribe(thread_id, after_seq=0)

    async def writer(n: int) -> None:
        for i in range(15):
            await store.write(thread_id, Batch(events=[delta(run, f"{n}.{i}"), delta(run)]))

    async with asyncio.timeout(10):
        await asyncio.gather(*(writer(n) for n in range(4)), collect(late, 30, got))
        await collect(late, total, got)
        results = await asyncio.gather(*consumers)
    await late.aclose()  # type: ignore[attr-defined]
    assert [e.seq for e in got] == list(range(1, total + 1))
    assert [e.seq for e in results[0]] == list(range(1, total + 1))
    assert [e.seq for e in results[1]] == list(range(2, total + 1))


async def test_a_slow_subscriber_falls_back_to_the_log(
    store: Store, thread_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tail, "QUEUE_LIMIT", 4)
    run, _ = await begin(store, thread_id)
    reads = 0
    read_events = store.read_events

    async def counting(*args: Any, **kwargs: Any) -> list[RunEvent]:
        nonlocal reads
        reads += 1
        return await read_events(*args, **kwargs)

    monkeypatch.setattr(store, "read_events", counting)
    stream = store.subscribe(thread_id)
    got: list[RunEvent] = []
    async with asyncio.timeout(5):
        await collect(stream, 1, got)  # registered, and has read the backlog
        for i in range(10):
            await store.write(thread_id, Batch(events=[delta(run, str(i)), delta(run, str(i))]))
        await collect(stream, 21, got)
    await stream.aclose()  # type: ignore[attr-defined]
    assert [e.seq for e in got] == list(range(1, 22))
    assert reads >= 2  # the backlog, then at least one re-read after the overflow


async def test_cancelling_the_consumer_unregisters_it(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    first = asyncio.Event()

    async def consume() -> None:
        async for _ in store.subscribe(thread_id):
            first.set()

    consumer = asyncio.create_task(consume())
    async with asyncio.timeout(5):
        await first.wait()
    assert live_subscribers(store, thread_id) == 1
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    assert live_subscribers(store, thread_id) == 0
    await store.write(thread_id, Batch(events=[delta(run)]))  # nobody listens: nothing breaks


async def test_subscribers_of_one_thread_come_and_go_independently(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    stay, leave = store.subscribe(thread_id, 1), store.subscribe(thread_id, 1)
    async with asyncio.timeout(5):
        await store.write(thread_id, Batch(events=[delta(run, "a")]))
        assert [e.seq for e in await collect(leave, 1)] == [2]
        await leave.aclose()  # type: ignore[attr-defined]
        assert [e.seq for e in await collect(stay, 1)] == [2]
        assert live_subscribers(store, thread_id) == 1
        await store.write(thread_id, Batch(events=[delta(run, "b")]))
        assert [e.seq for e in await collect(stay, 1)] == [3]
    await stay.aclose()  # type: ignore[attr-defined]
    assert live_subscribers(store, thread_id) == 0


async def _true(value: bool) -> bool:
    return value


async def test_the_backlog_and_an_overflow_are_read_in_pages(
    store: Store, thread_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tail, "QUEUE_LIMIT", 4)
    monkeypatch.setattr(_tail, "READ_PAGE", 3)
    run, _ = await begin(store, thread_id)
    await store.write(thread_id, Batch(events=[delta(run, str(i)) for i in range(9)]))  # seq 2..10
    limits: list[int | None] = []
    read_events = store.read_events

    async def counting(thread: str, after_seq: int = 0, limit: int | None = None) -> list[RunEvent]:
        limits.append(limit)
        return await read_events(thread, after_seq, limit)

    monkeypatch.setattr(store, "read_events", counting)
    stream = store.subscribe(thread_id, after_seq=1)
    got: list[RunEvent] = []
    async with asyncio.timeout(5):
        await collect(stream, 9, got)  # the backlog: three full pages (the empty fourth is read later)
        backlog_reads = len(limits)
        for i in range(5):  # 10 events waiting overflow a queue of 4: re-read, three at a time
            await store.write(thread_id, Batch(events=[delta(run, f"x{i}"), delta(run, f"y{i}")]))
        await collect(stream, 19, got)
    await stream.aclose()  # type: ignore[attr-defined]
    assert [e.seq for e in got] == list(range(2, 21))
    assert backlog_reads == 3
    assert limits and set(limits) == {3}
    assert len(limits) >= backlog_reads + 4  # ten re-read events take at least four pages
