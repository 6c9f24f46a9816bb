"""SQL stores: a write sent again lands once, any text round-trips, SQLite never blocks the loop,
and what was stored is there after a restart."""

from __future__ import annotations

import asyncio
import math
import sqlite3
import threading
import time
from pathlib import Path

import asyncpg
import pytest

from gateway import StoreUnavailableError, ThreadBusyError, ThreadForbiddenError
from gateway.events import RunStartedEvent
from gateway.models import AssistantMessage, UserMessage
from gateway.stores import Batch, ModelStepEntry, PostgresStore, SqliteStore, ThreadRecord
from gateway.stores._pg_batch import MAX_ARGS, WriteBatch
from gateway.stores._sql_tx import _Conflict
from gateway.stores._sqlite import _CHECKPOINT_ROWS

from ..conftest import own_postgres_store
from ._helpers import approval, begin, delta, new_run, thread_of
from ._pg_proxy import PgProxy
from ._sql_support import SqlStore, reopen, rows

HOSTILE = [
    "it's",
    "'); DROP TABLE threads; --",
    "\\'; SELECT 1; --",
    "back\\slash \\x41 \\\\",
    "$1 $2 $$ $tag$ :name ?1 ?",
    "E'\\n' \u2028 \r\n\t \x01",
    "ünïcödé ☀️ 𝄞",
    "",
]


async def test_a_write_sent_again_lands_once(sql_store: SqlStore, thread_id: str) -> None:
    run, _ = await begin(sql_store, thread_id)
    batch = Batch(
        run=run,
        events=[delta(run, "a"), delta(run, "b")],
        journal=[ModelStepEntry(step=0, message_id="m1", text="ab")],
        messages=[AssistantMessage(content="ab")],
        approvals=[approval(run)],
    )
    first = [e.seq for e in await sql_store.write(thread_id, batch)]
    again = [e.seq for e in await sql_store.write(thread_id, batch)]  # the same batch: its write id
    assert first == again == [2, 3]
    fresh = reopen(sql_store)  # a process that never saw the first reply
    try:
        assert [e.seq for e in await fresh.write(thread_id, batch)] == [2, 3]
    finally:
        await fresh.aclose()
    assert [e.seq for e in await sql_store.read_events(thread_id)] == [1, 2, 3]
    assert len(await sql_store.read_journal(thread_id, run.run_id)) == 1
    assert await sql_store.get_messages(thread_id) == [AssistantMessage(content="ab")]
    assert len(await sql_store.pending_approvals(thread_id)) == 1
    assert [e.seq for e in await sql_store.write(thread_id, Batch(events=[delta(run)]))] == [4]


async def test_a_begin_sent_again_is_the_same_begin(sql_store: SqlStore, thread_id: str) -> None:
    run = new_run(thread_id)
    batch = Batch(
        events=[RunStartedEvent(thread_id=thread_id, run_id=run.run_id, agent="default")],
        messages=[UserMessage(content="hi")],
    )
    thread = thread_of(thread_id)
    began = await sql_store.begin_run(run, thread=thread, batch=batch, lease_owner="p1", lease_ttl=30)
    again = await sql_store.begin_run(run, thread=thread, batch=batch, lease_owner="p1", lease_ttl=30)
    assert [e.seq for e in began.events] == [e.seq for e in again.events] == [1]
    assert again.history == [UserMessage(content="hi")]
    assert len(await sql_store.thread_runs(thread_id)) == 1


async def test_a_turn_on_a_thread_another_process_wrote_finds_it_there(sql_store: SqlStore, thread_id: str) -> None:
    run, _ = await begin(sql_store, thread_id, batch=Batch(messages=[UserMessage(content="first")]))
    await sql_store.write(thread_id, Batch(run=run.model_copy(update={"status": "completed"}), release=True))
    fresh = reopen(sql_store)  # it never wrote the thread: on PostgreSQL it tries to create it first
    try:
        with pytest.raises(ThreadForbiddenError):
            await begin(fresh, thread_id, owner="u2", batch=Batch(messages=[UserMessage(content="not hers")]))
        second = new_run(thread_id)
        began = await fresh.begin_run(
            second,
            thread=thread_of(thread_id),
            batch=Batch(
                events=[RunStartedEvent(thread_id=thread_id, run_id=second.run_id, agent="default")],
                messages=[UserMessage(content="again")],
            ),
            lease_owner="p2",
            lease_ttl=30,
        )
        assert [e.seq for e in began.events] == [1]  # the first begin wrote no event
        assert began.history == [UserMessage(content="first"), UserMessage(content="again")]
        other = reopen(sql_store)
        try:
            with pytest.raises(ThreadBusyError):
                await begin(other, thread_id)
        finally:
            await other.aclose()
    finally:
        await fresh.aclose()
    assert await sql_store.get_messages(thread_id) == [UserMessage(content="first"), UserMessage(content="again")]
    assert [r.run_id for r in await sql_store.thread_runs(thread_id)] == [run.run_id, second.run_id]


@pytest.mark.postgres
async def test_a_commit_whose_reply_was_lost_is_written_again_once(postgres_dsn: str, thread_id: str) -> None:
    async with own_postgres_store(postgres_dsn) as direct, PgProxy(postgres_dsn) as proxy:
        await direct.ping()
        store = PostgresStore(proxy.dsn, schema=direct.schema, timeout=5)
        try:
            run, _ = await begin(store, thread_id)
            batch = Batch(run=run, events=[delta(run, "once"), delta(run, "only")])
            # The values travel in the message that runs the statement (its text may be prepared already).
            proxy.lose_reply_after(b'"delta":"once"')
            with pytest.raises(StoreUnavailableError) as lost:
                await store.write(thread_id, batch)
            assert proxy.lost.is_set() and "PostgreSQL at" in str(lost.value)
            assert [e.seq for e in await direct.read_events(thread_id)] == [1, 2, 3], "it was committed"

            written = await store.write(thread_id, batch)  # what a driver does once the store answers
            assert [e.seq for e in written] == [2, 3]
            assert [e.seq for e in await direct.read_events(thread_id)] == [1, 2, 3]
            assert await direct.last_seq(thread_id) == 3
        finally:
            await store.aclose()


async def test_any_text_round_trips(sql_store: SqlStore) -> None:
    for index, text in enumerate(HOSTILE):
        printable = text.isprintable() and text  # ids refuse control characters before any store sees them
        thread_id = f"t-{index}-{text}" if printable else f"t-{index}"
        owner = text if printable else "u1"
        run, _ = await begin(sql_store, thread_id, owner=owner)
        record = approval(run, tool=f"tool {text}")
        record.input = {"text": text, text: [text]}
        events = [delta(run, text)]
        await sql_store.write(
            thread_id, Batch(run=run, events=events, messages=[UserMessage(content=text)], approvals=[record])
        )
        [_, read] = await sql_store.read_events(thread_id)
        assert read.delta == text  # type: ignore[attr-defined]
        assert await sql_store.get_messages(thread_id) == [UserMessage(content=text)]
        assert await sql_store.get_approval(record.tool_call_id) == record
        stored = await sql_store.get_thread(thread_id)
        assert stored is not None and stored.owner_id == owner
        await sql_store.channel_set(f"key {text}", {"value": text})
        assert await sql_store.channel_get(f"key {text}") == {"value": text}
    [(count,)] = await rows(sql_store, "SELECT count(*) FROM threads")
    assert count == len(HOSTILE)


@pytest.mark.postgres
async def test_a_nul_character_is_refused_by_postgres_and_nothing_is_written(postgres_dsn: str) -> None:
    async with own_postgres_store(postgres_dsn) as store:
        run = new_run("t-nul").model_copy(update={"run_id": "run-\x00"})
        with pytest.raises(ValueError, match="NUL"):  # a guarded write: refused before anything is sent
            await store.begin_run(run, thread=thread_of("t-nul"), batch=Batch(), lease_owner="p1", lease_ttl=30)
        with pytest.raises(ValueError, match="PostgreSQL refused a value"):
            await store.ensure_thread(ThreadRecord(thread_id="t-\x00-nul", owner_id="u1"))  # the server refuses
        assert await rows(store, "SELECT count(*) FROM threads") == [(0,)]
        run, _ = await begin(store, "t-fine")
        with pytest.raises(ValueError):
            await store.channel_set("key\x00", 1)
        assert [e.seq for e in await store.write("t-fine", Batch(events=[delta(run, "after")]))] == [2]


async def test_the_event_loop_runs_while_sqlite_waits_for_another_process(tmp_path: Path, thread_id: str) -> None:
    path = tmp_path / "agora.db"
    store = SqliteStore(path, busy_timeout=10)
    holding, release = threading.Event(), threading.Event()

    def other_process() -> None:  # another connection holding the write lock
        connection = sqlite3.connect(path, isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        holding.set()
        release.wait(10)
        connection.execute("COMMIT")
        connection.close()

    try:
        await store.ping()
        holder = threading.Thread(target=other_process)
        holder.start()
        await asyncio.to_thread(holding.wait, 10)
        started = time.perf_counter()
        waiting = asyncio.create_task(begin(store, thread_id))
        for _ in range(200):  # loop turns, while the store's thread waits for the lock
            await asyncio.sleep(0)
        assert not waiting.done()
        assert time.perf_counter() - started < 2, "the loop kept turning"
        release.set()
        async with asyncio.timeout(10):
            run, events = await waiting
        assert [e.seq for e in events] == [1] and run.status == "running"
        await asyncio.to_thread(holder.join, 10)
    finally:
        release.set()
        await store.aclose()


async def test_sqlite_checkpoints_beside_the_writer_and_its_wal_starts_over(tmp_path: Path, thread_id: str) -> None:
    path = tmp_path / "agora.db"
    store = SqliteStore(path)
    try:
        run, _ = await begin(store, thread_id)
        body = "w" * 3000  # about a page per event: the WAL grows by a few pages per write
        for _ in range(40 * _CHECKPOINT_ROWS // 4):
            await store.write(thread_id, Batch(events=[delta(run, body), delta(run, body), delta(run, body)]))
        # Written many times over, the WAL stays the size of a few checkpoint intervals, and
        # the writes reached the database file while the store ran.
        wal = (tmp_path / "agora.db-wal").stat().st_size
        assert wal < 16 * 2**20 and 4 * wal < path.stat().st_size
        [(automatic,)] = await rows(store, "PRAGMA wal_autocheckpoint")
        assert automatic == 0  # no commit runs SQLite's own checkpoint
        assert await store.last_seq(thread_id) == 1 + 3 * (40 * _CHECKPOINT_ROWS // 4)
    finally:
        await store.aclose()
    assert not (tmp_path / "agora.db-wal").exists()  # closed: all of it is in the file


async def test_a_lock_held_past_the_busy_timeout_is_an_outage_and_the_write_lands_after(
    tmp_path: Path, thread_id: str
) -> None:
    path = tmp_path / "agora.db"
    store = SqliteStore(path, busy_timeout=0.1)
    try:
        run, _ = await begin(store, thread_id)
        other = sqlite3.connect(path, isolation_level=None)  # another process, holding the write lock
        other.execute("BEGIN IMMEDIATE")
        held = Batch(events=[delta(run, "held")])
        try:
            with pytest.raises(StoreUnavailableError, match="database is locked"):
                await store.write(thread_id, held)
        finally:
            other.execute("COMMIT")
            other.close()
        assert [e.seq for e in await store.write(thread_id, held)] == [2]
        assert [e.seq for e in await store.read_events(thread_id)] == [1, 2]
    finally:
        await store.aclose()


async def test_a_pending_approval_and_its_thread_survive_a_restart(sql_store: SqlStore, thread_id: str) -> None:
    run, _ = await begin(sql_store, thread_id, batch=Batch(messages=[UserMessage(content="purge it")]))
    pending = approval(run)
    parked = run.model_copy(update={"status": "awaiting-approval"})
    await sql_store.write(thread_id, Batch(run=parked, events=[delta(run)], approvals=[pending], release=True))
    await sql_store.aclose()

    restarted = reopen(sql_store)
    try:
        assert [a.tool_call_id for a in await restarted.pending_approvals(thread_id)] == [pending.tool_call_id]
        assert await restarted.get_messages(thread_id) == [UserMessage(content="purge it")]
        assert [e.seq for e in await restarted.read_events(thread_id)] == [1]
        claimed = await restarted.claim_run(run.run_id, owner="p2", ttl=30, expect=frozenset({"awaiting-approval"}))
        assert claimed is not None and claimed.status == "running"
        settled = await restarted.settle_approval(pending.tool_call_id, status="approved", decided_by="u1", via="web")
        assert settled is not None and settled.status == "approved"
    finally:
        await restarted.aclose()


async def test_a_closed_store_refuses_calls(sql_store: SqlStore) -> None:
    await sql_store.ping()
    await sql_store.aclose()
    await sql_store.aclose()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        await sql_store.get_thread("t")


@pytest.mark.postgres
@pytest.mark.parametrize("many", [False, True], ids=["one statement", "too many arguments for one"])
async def test_a_guarded_batch_binds_every_value_and_writes_all_or_nothing(postgres_dsn: str, many: bool) -> None:
    values: list[object] = [*HOSTILE, 1.5, 1e-300, 0.1 + 0.2, -0.0, math.inf, -math.inf, 2**62, -1, 0, None, True]
    copies = MAX_ARGS // (6 * len(values)) + 1 if many else 1
    rows = [(index, value if isinstance(value, str) else None, value if isinstance(value, float) else None,
             value if type(value) is int else None, value if type(value) is bool else None, bytes(range(256)))
            for index, value in enumerate(values * copies)]  # fmt: skip
    connection = await asyncpg.connect(postgres_dsn)
    try:
        await connection.execute(
            "CREATE TEMP TABLE guarded (k INT PRIMARY KEY, t TEXT, f FLOAT8, i BIGINT, b BOOL, y BYTEA);"
            "CREATE TEMP TABLE marker (k INT PRIMARY KEY, v INT NOT NULL); INSERT INTO marker VALUES (1, 7)"
        )
        insert = "INSERT INTO guarded (k, t, f, i, b, y) VALUES ($1, $2, $3, $4, $5, $6)"

        def batch(version: int) -> WriteBatch:
            written = WriteBatch()
            written.add("guard", "UPDATE marker SET v = $2 WHERE k = 1 AND v = $1", [(version, version + 1)])
            written.add("put", insert, rows)
            written.notify("agora_test_channel", "it's $1")
            return written

        stale = batch(6)
        if copies == 1:  # the text is the batch's shape, with no value in it
            sql, args = stale.statement()
            assert "'" not in sql and "Lisbon" not in sql and len(args) == 2 + 6 * len(rows) + 2
            assert sql == batch(8).statement()[0]
        with pytest.raises(_Conflict):
            await stale.send(connection)  # the guard's row is not as read: nothing is written
        assert await connection.fetchval("SELECT count(*) FROM guarded") == 0
        await batch(7).send(connection)
        back = await connection.fetch("SELECT k, t, f, i, b, y FROM guarded ORDER BY k")
        assert [tuple(row) for row in back] == rows
        assert await connection.fetchval("SELECT v FROM marker") == 8
    finally:
        await connection.close()
