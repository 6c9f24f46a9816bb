"""PostgreSQL as many processes see it: two stores on one schema race for runs and follow each
other's writes; a listening connection that drops, and a server that is away, lose nothing."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest

from gateway import StoreUnavailableError
from gateway.events import RunEvent
from gateway.stores import Batch, PostgresStore

from ..conftest import _admin, own_postgres_store
from ._helpers import begin, collect, delta, eventually
from ._pg_proxy import PgProxy

pytestmark = pytest.mark.postgres

RUNNING = frozenset({"running"})
PARKED = frozenset({"awaiting-approval"})


@pytest.fixture
async def two(postgres_dsn: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores on one schema: two gateway processes sharing the database."""
    async with own_postgres_store(postgres_dsn) as first:
        second = PostgresStore(postgres_dsn, schema=first.schema)
        try:
            await asyncio.gather(first.ping(), second.ping())
            yield first, second
        finally:
            await second.aclose()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_two_processes_claiming_a_parked_run_admit_exactly_one(
    two: tuple[PostgresStore, PostgresStore], thread_id: str
) -> None:
    first, second = two
    for attempt in range(5):
        run, _ = await begin(first, f"{thread_id}-{attempt}")
        parked = run.model_copy(update={"status": "awaiting-approval"})
        await first.write(run.thread_id, Batch(run=parked, release=True))
        claims = await asyncio.gather(
            *(
                (first if i % 2 else second).claim_run(run.run_id, owner=f"p{i}", ttl=30, expect=PARKED)
                for i in range(8)
            )
        )
        winners = [claim for claim in claims if claim is not None]
        assert len(winners) == 1
        stored = await second.get_run(run.run_id)
        assert stored is not None and stored.status == "running"


async def test_two_sweeps_of_an_expired_lease_take_the_run_once(
    two: tuple[PostgresStore, PostgresStore], thread_id: str
) -> None:
    first, second = two
    run, _ = await begin(first, thread_id, lease_owner="dead", ttl=0.05)

    async def lapsed() -> bool:
        return (thread_id, run.run_id) in await second.expired_leases()

    await eventually(lapsed)

    async def sweep(store: PostgresStore, owner: str) -> list[str]:
        taken = []
        for _, run_id in await store.expired_leases():
            if await store.claim_run(run_id, owner=owner, ttl=30, expect=RUNNING) is not None:
                taken.append(run_id)
        return taken

    results = await asyncio.gather(*(sweep(store, f"p{i}") for i, store in enumerate([first, second] * 3)))
    assert sum(result.count(run.run_id) for result in results) == 1
    assert await first.expired_leases() == []
    assert await second.renew_lease(thread_id, run.run_id, owner="dead", ttl=30) is False


async def test_a_live_tail_on_one_process_sees_the_writes_of_another(
    two: tuple[PostgresStore, PostgresStore], thread_id: str
) -> None:
    writer, reader = two
    got: list[RunEvent] = []
    tail = asyncio.create_task(collect(reader.subscribe(thread_id), 1 + 3 * 10, got))
    await eventually(lambda: _true(reader.followers.count(thread_id) == 1 and reader.hub.connected))
    run, _ = await begin(writer, thread_id)
    for i in range(10):
        await writer.write(thread_id, Batch(events=[delta(run, f"{i}a"), delta(run, f"{i}b"), delta(run, f"{i}c")]))
    async with asyncio.timeout(10):
        await tail
    assert [e.seq for e in got] == list(range(1, 32))


async def test_a_batch_too_large_to_notify_reaches_the_tail_from_the_log(
    two: tuple[PostgresStore, PostgresStore], thread_id: str
) -> None:
    writer, reader = two
    run, _ = await begin(writer, thread_id)
    stream = reader.subscribe(thread_id, after_seq=1)
    got: list[RunEvent] = []
    async with asyncio.timeout(10):
        consumer = asyncio.create_task(collect(stream, 3, got))
        await eventually(lambda: _true(reader.followers.count(thread_id) == 1))
        await writer.write(thread_id, Batch(events=[delta(run, "x" * 6000), delta(run, "y" * 6000)]))
        await writer.write(thread_id, Batch(events=[delta(run, "small")]))
        await consumer
    assert [e.seq for e in got] == [2, 3, 4]
    assert [len(e.delta) for e in got] == [6000, 6000, 5]  # type: ignore[attr-defined]


async def test_a_dropped_listening_connection_comes_back_without_gaps_or_doubles(
    two: tuple[PostgresStore, PostgresStore], thread_id: str
) -> None:
    writer, reader = two
    run, _ = await begin(writer, thread_id)
    got: list[RunEvent] = []
    stream = reader.subscribe(thread_id)
    async with asyncio.timeout(15):
        await collect(stream, 1, got)
        await _admin(
            writer._dsn,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE query = 'LISTEN \"{reader.channel}\"' AND datname = current_database()",
        )
        await eventually(lambda: _true(not reader.hub.connected or reader.hub.reconnections > 0))
        for i in range(5):  # written while the reader may not listen
            await writer.write(thread_id, Batch(events=[delta(run, str(i))]))
        await eventually(lambda: _true(reader.hub.reconnections == 1 and reader.hub.connected))
        await writer.write(thread_id, Batch(events=[delta(run, "after")]))
        await collect(stream, 7, got)
    await stream.aclose()  # type: ignore[attr-defined]
    assert [e.seq for e in got] == list(range(1, 8))


async def test_an_unreachable_server_raises_store_unavailable(thread_id: str) -> None:
    port = free_port()
    store = PostgresStore(f"postgresql://agora:s3cret@127.0.0.1:{port}/agora", connect_timeout=1, subscribe_timeout=1)
    try:
        with pytest.raises(StoreUnavailableError) as refused:
            await store.ping()
        message = str(refused.value)
        assert f"127.0.0.1:{port}" in message and "s3cret" not in message and ":***@" in message
        assert isinstance(refused.value.__cause__, OSError)
        with pytest.raises(StoreUnavailableError):
            await store.write(thread_id, Batch())
        with pytest.raises(StoreUnavailableError):
            async for _ in store.subscribe(thread_id):
                pass
    finally:
        await store.aclose()


async def test_a_server_away_and_back_loses_no_write_and_no_live_event(postgres_dsn: str, thread_id: str) -> None:
    async with own_postgres_store(postgres_dsn) as direct, PgProxy(postgres_dsn) as proxy:
        await direct.ping()
        store = PostgresStore(proxy.dsn, schema=direct.schema, timeout=3, connect_timeout=1)
        try:
            run, _ = await begin(store, thread_id)
            got: list[RunEvent] = []
            stream = store.subscribe(thread_id)
            async with asyncio.timeout(20):
                await collect(stream, 1, got)
                await proxy.down()
                held = Batch(events=[delta(run, "held")])
                with pytest.raises(StoreUnavailableError):
                    await store.write(thread_id, held)
                await direct.write(thread_id, Batch(events=[delta(run, "elsewhere")]))  # another process
                await proxy.up()
                written = await store.write(thread_id, held)  # the driver writes the held step again
                assert [e.seq for e in written] == [3]
                await collect(stream, 3, got)
            await stream.aclose()  # type: ignore[attr-defined]
            assert [e.seq for e in got] == [1, 2, 3]
            assert [e.delta for e in got[1:]] == ["elsewhere", "held"]  # type: ignore[attr-defined]
        finally:
            await store.aclose()


async def _true(value: bool) -> bool:
    return value
