"""What the SQL store tests share: another instance on the same database, raw SQL through a store."""

from __future__ import annotations

from typing import Any

from gateway.stores import PostgresStore, SqliteStore
from gateway.stores._sql_tx import Row, Tx

SqlStore = SqliteStore | PostgresStore


def reopen(store: SqlStore, **options: Any) -> SqlStore:
    """Another store on the same database (as another process, or the same one after a restart)."""
    if isinstance(store, SqliteStore):
        return SqliteStore(store.path, **options)
    return PostgresStore(store._dsn, schema=store.schema, **options)


async def rows(store: SqlStore, sql: str, *args: Any) -> list[Row]:
    """Run ``sql`` on the store's own connection (its schema, its placeholders)."""

    async def fetch(tx: Tx) -> list[Row]:
        return await tx.fetch(sql, *args)

    return await store._run(fetch)


async def execute(store: SqlStore, sql: str, *args: Any) -> None:
    """Run a write on the store's own connection."""

    async def run(tx: Tx) -> None:
        await tx.execute(sql, *args)

    await store._run(run)
