"""The SQL stores make and migrate their own schema, and refuse one newer than the code."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway import ThreadParkedError
from gateway.stores import Batch, PostgresStore, SqliteStore, ThreadRecord, UsageEntry, UsageTotals, _sql_schema
from gateway.stores._usage import LEDGER_DAYS, USAGE_WRITE_DAYS
from tools import UserError

from ..conftest import drop_schema
from ._helpers import approval, begin, delta, new_run, thread_of
from ._sql_support import SqlStore, execute, reopen, rows
from .test_queue import queued


async def version(store: SqlStore) -> int:
    [(value,)] = await rows(store, "SELECT value FROM meta WHERE name = 'schema_version'")
    return int(value)


async def test_an_empty_database_gets_every_table_on_first_use(sql_store: SqlStore, thread_id: str) -> None:
    await sql_store.ping()
    assert await version(sql_store) == _sql_schema.SCHEMA_VERSION == len(_sql_schema.MIGRATIONS)
    run, _ = await begin(sql_store, thread_id)
    assert [r.run_id for r in await sql_store.thread_runs(thread_id)] == [run.run_id]
    counts = {"threads": 1, "events": 1, "runs": 1, "messages": 0, "journal": 0, "approvals": 0, "media": 0}
    for table, count in (counts | {"renders": 0, "channel_state": 0, "confirm_tokens": 0}).items():
        assert await rows(sql_store, f"SELECT count(*) FROM {table}") == [(count,)], table


async def test_a_newer_schema_is_refused_in_one_line_and_left_as_it_is(sql_store: SqlStore, thread_id: str) -> None:
    await begin(sql_store, thread_id)
    newer = _sql_schema.SCHEMA_VERSION + 1
    await execute(sql_store, "UPDATE meta SET value = $1 WHERE name = 'schema_version'", str(newer))
    later = reopen(sql_store)  # a process of this (older) agora-gateway starting on it
    try:
        with pytest.raises(UserError) as refused:
            await later.ping()
        message = str(refused.value)
        assert f"schema version {newer}, newer than this agora-gateway knows ({newer - 1})" in message
        assert "upgrade agora-gateway" in message and "\n" not in message
        with pytest.raises(UserError):  # every call, not only the first
            await later.get_thread(thread_id)
        with pytest.raises(UserError):
            await later.write(thread_id, Batch())
    finally:
        await later.aclose()
    assert await version(sql_store) == newer, "the refusing store changed nothing"
    assert await sql_store.last_seq(thread_id) == 1


async def test_an_older_schema_is_migrated_and_keeps_its_data(
    sql_store: SqlStore, thread_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as older:  # the agora-gateway of migration 1 only
        older.setattr(_sql_schema, "SCHEMA_VERSION", 1)
        # What that version's code wrote (the calls whose SQL did not change since).
        await sql_store.ensure_thread(thread_of(thread_id))
        run = new_run(thread_id)
        await sql_store.write(thread_id, Batch(events=[delta(run, "kept"), delta(run, "too")]))
        assert await version(sql_store) == 1
    upgraded = reopen(sql_store)
    try:
        await upgraded.ping()
        assert await version(upgraded) == _sql_schema.SCHEMA_VERSION
        assert [e.seq for e in await upgraded.read_events(thread_id)] == [1, 2]
        assert await rows(upgraded, "SELECT count(*) FROM media") == [(0,)]  # migration 2 made it
        assert await rows(upgraded, "SELECT count(*) FROM queue") == [(0,)]  # migration 3 made it
        assert await rows(upgraded, "SELECT count(*) FROM usage_lines") == [(0,)]  # migration 4 made it
        assert await rows(upgraded, "SELECT count(*) FROM usage_writes") == [(0,)]  # and this one
    finally:
        await upgraded.aclose()


async def test_a_version_2_database_gets_the_queue_and_its_approvals_their_request_time(
    sql_store: SqlStore, thread_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as older:  # the agora-gateway of migration 2: approvals without requested_ts
        older.setattr(_sql_schema, "SCHEMA_VERSION", 2)
        await sql_store.ensure_thread(thread_of(thread_id))
        run = new_run(thread_id)
        await sql_store.write(thread_id, Batch(events=[delta(run, "kept")]))
        record = approval(run).model_copy(update={"requested_at": "2026-11-29T20:27:20.125+00:00"})
        await execute(
            sql_store,
            "INSERT INTO approvals (tool_call_id, thread_id, status, expires_ts, record) VALUES ($1, $2, $3, $4, $5)",
            record.tool_call_id,
            thread_id,
            "pending",
            record.expires_ts,
            record.model_dump_json(exclude={"requested_ts"}),
        )
        assert await version(sql_store) == 2
    upgraded = reopen(sql_store)
    try:
        await upgraded.ping()
        assert await version(upgraded) == _sql_schema.SCHEMA_VERSION
        assert [e.seq for e in await upgraded.read_events(thread_id)] == [1]
        [listed] = [a for a in await upgraded.open_approvals(limit=1000) if a.tool_call_id == record.tool_call_id]
        expected = datetime.fromisoformat(record.requested_at).timestamp()
        assert listed.requested_ts == pytest.approx(expected, abs=0.002)
        assert listed.model_dump(exclude={"requested_ts"}) == record.model_dump(exclude={"requested_ts"})
        cursor = (listed.requested_ts, listed.tool_call_id)
        assert record.tool_call_id not in [a.tool_call_id for a in await upgraded.open_approvals(before=cursor)]
        with pytest.raises(ThreadParkedError):  # the old approval parks the thread as before
            await begin(upgraded, thread_id)
        item = queued(thread_id)
        assert await upgraded.enqueue_message(item, limit=5) == 1
        assert await upgraded.queued_messages(thread_id) == [item]
    finally:
        await upgraded.aclose()


async def test_a_version_3_database_gets_the_usage_ledger_and_the_buckets(
    sql_store: SqlStore, thread_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as older:  # the agora-gateway of migration 3: no ledger, no buckets
        older.setattr(_sql_schema, "SCHEMA_VERSION", 3)
        await sql_store.ensure_thread(thread_of(thread_id))
        await sql_store.write(thread_id, Batch(events=[delta(new_run(thread_id), "kept")]))
        assert await version(sql_store) == 3
    upgraded = reopen(sql_store)
    try:
        await upgraded.ping()
        assert await version(upgraded) == _sql_schema.SCHEMA_VERSION == 4
        assert [e.seq for e in await upgraded.read_events(thread_id)] == [1]
        entry = UsageEntry(actor_key="u1", day="2026-12-01", agent="a", model="m", input_tokens=2, output_tokens=3)
        assert await upgraded.add_usage(entry) == UsageTotals(day_tokens=5, month_tokens=5)
        assert await upgraded.take_token("actor:u1", rate=1.0, burst=1, now=100.0) == 0.0
    finally:
        await upgraded.aclose()


async def test_the_sweep_drops_an_old_ledger_and_full_buckets(sql_store: SqlStore) -> None:
    now = time.time()
    today = datetime.fromtimestamp(now, UTC).date()
    old, kept = (today - timedelta(days=LEDGER_DAYS + 1)).isoformat(), (today - timedelta(days=LEDGER_DAYS)).isoformat()
    for day in (old, kept, "2020-01-15"):
        await sql_store.add_usage(
            UsageEntry(actor_key="u1", day=day, agent="a", model="m", input_tokens=1, output_tokens=0)
        )
    await sql_store.add_usage(
        UsageEntry(actor_key="u1", day=kept, agent="a", model="m", input_tokens=1, output_tokens=0, write_id="new")
    )
    await execute(
        sql_store,
        "INSERT INTO usage_writes (actor_key, write_id, written_ts) VALUES ('u1', 'old', $1)",
        now - USAGE_WRITE_DAYS * 86_400 - 10,
    )
    await sql_store.take_token("idle", rate=1.0, burst=2, now=now - 10)  # full again 9 s ago
    await sql_store.take_token("busy", rate=0.001, burst=2, now=now)  # full in 1000 s
    later = reopen(sql_store, sweep_interval=0)
    try:
        await later.channel_set("k", 1)  # an expiring write sweeps now
        assert await rows(later, "SELECT day FROM usage_lines ORDER BY day") == [(kept,)]
        periods = {period for (period,) in await rows(later, "SELECT period FROM usage_totals")}
        assert periods == {kept, kept[:7]}  # the old day's month is the kept day's, or older
        assert await rows(later, "SELECT key FROM buckets") == [("busy",)]
        assert await rows(later, "SELECT write_id FROM usage_writes") == [("new",)]  # kept USAGE_WRITE_DAYS
    finally:
        await later.aclose()


@pytest.mark.postgres
async def test_two_processes_starting_on_an_empty_schema_migrate_it_once(postgres_dsn: str) -> None:
    schema = f"test_{uuid.uuid4().hex[:12]}"
    stores = [PostgresStore(postgres_dsn, schema=schema) for _ in range(4)]
    try:
        await asyncio.gather(*(store.ping() for store in stores))
        assert await rows(stores[0], "SELECT name, value FROM meta") == [
            ("schema_version", str(_sql_schema.SCHEMA_VERSION))
        ]
        await stores[1].ensure_thread(ThreadRecord(thread_id="t", owner_id="u1"))
        assert await stores[2].get_thread("t") is not None
    finally:
        for store in stores:
            await store.aclose()
        await drop_schema(postgres_dsn, schema)


def test_a_postgres_schema_must_be_a_plain_name() -> None:
    for bad in ("Agora", "a-b", 'x"; DROP SCHEMA public; --', "", "1abc", "a" * 64):
        with pytest.raises(UserError, match="schema must be a lower-case name"):
            PostgresStore("postgresql://postgres@127.0.0.1/agora", schema=bad)


async def test_a_sqlite_store_creates_the_folder_of_its_file(tmp_path: Path) -> None:
    path = tmp_path / ".agora" / "nested" / "agora.db"
    store = SqliteStore(path)
    try:
        await store.ping()
        assert path.is_file()
        [(mode,)] = await rows(store, "PRAGMA journal_mode")
        assert mode == "wal"
    finally:
        await store.aclose()
