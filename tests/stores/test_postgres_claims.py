"""``PostgresStore.claim_run`` while another transaction holds the thread's row: it waits, it does not skip.

The long-outage fault test on PostgreSQL ran 1-3 tools of 48 twice in about half the runs when
``claim_run`` read the rows with ``SKIP LOCKED``: after the outage a process's sweep renewed a
lease too late (it had lapsed) and took it back with ``claim_run`` while its own driver was
writing the held step, which locks the thread's row. The skipped row answered ``None``, which
``Leases.reclaim`` reads as "another process took the run": the sweep stopped the driver, its
held result was dropped, and the run resumed later from its journal, running the tool again.
Here the write in flight is a plain transaction that locks the row on a connection of the test's.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import asyncpg
import pytest

from gateway.stores import PostgresStore

from ..conftest import own_postgres_store
from ._helpers import begin

pytestmark = pytest.mark.postgres


async def waiting_on_a_lock(admin: asyncpg.Connection, database: str) -> bool:
    count = await admin.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'", database
    )
    return bool(count)


async def test_the_holder_reclaiming_its_run_while_its_thread_is_written_gets_it(postgres_dsn: str) -> None:
    async with own_postgres_store(postgres_dsn) as store:
        assert isinstance(store, PostgresStore)
        run, _ = await begin(store, "t-claim", lease_owner="alpha", ttl=30.0)
        writer = await asyncpg.connect(postgres_dsn, server_settings={"search_path": store.schema})
        admin = await asyncpg.connect(postgres_dsn)
        try:
            transaction = writer.transaction()
            await transaction.start()
            await writer.execute("SELECT 1 FROM threads WHERE thread_id = $1 FOR UPDATE", "t-claim")
            claim = asyncio.create_task(
                store.claim_run(run.run_id, owner="alpha", ttl=30.0, expect=frozenset({"running"}))
            )
            async with asyncio.timeout(10):  # the claim waits for the row (or, skipping it, is done at once)
                while not claim.done() and not await waiting_on_a_lock(admin, urlsplit(postgres_dsn).path.lstrip("/")):
                    await asyncio.sleep(0.01)
            await transaction.commit()  # the write in flight ends
            claimed = await asyncio.wait_for(claim, 10)
        finally:
            await writer.close()
            await admin.close()
        assert claimed is not None and claimed.run_id == run.run_id, "the holder's own run, not 'taken by another'"
