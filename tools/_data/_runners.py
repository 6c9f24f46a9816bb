r"""Running a guarded query on each database: read-only, and stopped when its time is up.

| database | read-only | time limit (stops the query on the server) |
|---|---|---|
| PostgreSQL | ``SET TRANSACTION READ ONLY`` | ``SET LOCAL statement_timeout`` |
| MariaDB | ``SET TRANSACTION READ ONLY`` | ``SET STATEMENT max_statement_time=... FOR <query>`` |
| MySQL | ``SET TRANSACTION READ ONLY`` | ``SET SESSION max_execution_time`` (reset after) |
| SQLite | ``PRAGMA query_only = ON`` (restored after) | a progress handler that aborts the statement |

PostgreSQL also reads the statement with ``standard_conforming_strings`` on (``SET LOCAL``),
whatever the server, the role or the database says: sqlglot writes strings for that setting
(``'x\'`` is an x and a backslash), and with it off the same text reads the backslash as an
escape, so that what the guard checked as a string would run as SQL.

Every transaction is rolled back, whatever happened: the tool has nothing to commit. The caller
adds an ``asyncio.timeout`` a little longer than the database's own limit as a last resort.

SQLite also checks the statement itself, through an authorizer set for the one statement: it
may read the allowed tables (or through an allowed view) and call functions off the deny-list,
and do nothing else. A slip of the guard (or of sqlglot) would end there, in the database.

Rows are read through a server-side cursor, ``_BATCH`` at a time (asyncpg's own cursor on
PostgreSQL, SQLAlchemy's elsewhere), and handed to a ``RowSink`` as they come; once it wants no
more, the rest are never read into memory. A query answering 2,000 rows of 100 kB for an answer
of 16 kB holds a batch of them, not 200 MB. One value is still read whole: its size is bounded
by the database only (1 GB on PostgreSQL and SQLite, ``max_allowed_packet`` on MariaDB).
"""

from __future__ import annotations

import abc
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sqlalchemy import Connection
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

_PG_SETTINGS = "SELECT current_setting('transaction_read_only'), current_setting('standard_conforming_strings')"
"""What a PostgreSQL transaction must hold (``on``, ``on``) before the query runs in it."""
_SQLITE_STEPS = 1_000
"""Virtual-machine steps between two looks at the SQLite deadline (a few microseconds)."""
_BATCH = 8
"""Rows asked of the database at a time."""


@dataclass(frozen=True, kw_only=True)
class Fetched:
    """What a query answered: its column names, and its rows unless a ``RowSink`` took them."""

    columns: list[str]
    rows: list[Sequence[Any]]


class RowSink(Protocol):
    """Where the rows of a query go as the database hands them over."""

    def take(self, row: Sequence[Any]) -> bool:
        """Keep ``row``; ``False`` when no more rows are wanted (the rest are never read)."""
        ...


@dataclass(frozen=True, kw_only=True)
class Reads:
    """What one statement may touch, for a database that can check it itself (SQLite)."""

    tables: frozenset[tuple[str, str]]
    """``(schema, name)`` of every allowed table and view, lowered."""
    denied_function: Callable[[str], bool]
    """Whether a (lowered) function name is refused."""

    def authorizer(self) -> Callable[[int, str | None, str | None, str | None, str | None], int]:
        """An SQLite authorizer callback that allows these reads and nothing else."""
        views = frozenset(name for _, name in self.tables)

        def authorize(action: int, arg1: str | None, arg2: str | None, schema: str | None, source: str | None) -> int:
            if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE):
                return sqlite3.SQLITE_OK
            if action == sqlite3.SQLITE_READ:
                table = ((schema or "main").lower(), (arg1 or "").lower())
                # Through an allowed view, the view's own tables are read on its behalf.
                allowed = table in self.tables or (source is not None and source.lower() in views)
                return sqlite3.SQLITE_OK if allowed else sqlite3.SQLITE_DENY
            if action == sqlite3.SQLITE_FUNCTION:
                return sqlite3.SQLITE_DENY if self.denied_function((arg2 or "").lower()) else sqlite3.SQLITE_OK
            return sqlite3.SQLITE_DENY

        return authorize


def _keep(row: Sequence[Any], rows: list[Sequence[Any]], sink: RowSink | None) -> bool:
    """Hand ``row`` on (to ``sink``, else to ``rows``); ``False`` once no more are wanted."""
    if sink is None:
        rows.append(tuple(row))
        return True
    return sink.take(tuple(row))


async def _execute(conn: AsyncConnection, sql: str, params: Any, sink: RowSink | None) -> Fetched:
    """Run ``sql`` through a server-side cursor, ``_BATCH`` rows at a time, while ``sink`` takes them."""

    def read(sync: Connection) -> Fetched:
        rows: list[Sequence[Any]] = []
        options = {"stream_results": True, "max_row_buffer": _BATCH}
        result = sync.exec_driver_sql(sql, params, execution_options=options)
        try:
            columns = [str(key) for key in result.keys()]
            for row in result:  # from a buffer of at most _BATCH rows, refilled as it empties
                if not _keep(row, rows, sink):
                    break
            return Fetched(columns=columns, rows=rows)
        finally:
            result.close()  # MySQL's unbuffered cursor reads (and drops) the rows left

    return await conn.run_sync(read)


async def _execute_asyncpg(conn: AsyncConnection, sql: str, params: Any, sink: RowSink | None) -> Fetched:
    """``_execute`` on asyncpg's own cursor (SQLAlchemy's reads 50 rows at a time, whatever their size).

    It runs in the transaction SQLAlchemy opened on the connection. asyncpg's errors are given
    as SQLAlchemy's ``DBAPIError``, as every other path gives them.
    """
    from sqlalchemy.exc import DBAPIError

    raw = await conn.get_raw_connection()
    connection: Any = raw.driver_connection  # the asyncpg.Connection
    rows: list[Sequence[Any]] = []
    try:
        statement = await connection.prepare(sql)
        columns = [attribute.name for attribute in statement.get_attributes()]
        async for record in statement.cursor(*(params or ()), prefetch=_BATCH):
            if not _keep(record, rows, sink):
                break
    except Exception as exc:
        if type(exc).__module__.split(".")[0] != "asyncpg":
            raise
        raise DBAPIError.instance(sql, params, exc, Exception) from exc
    return Fetched(columns=columns, rows=rows)


class Runner(abc.ABC):
    """Runs one guarded statement read-only, within ``timeout`` seconds."""

    @abc.abstractmethod
    async def run(
        self, engine: AsyncEngine, sql: str, params: Any, timeout: float, reads: Reads, sink: RowSink | None = None
    ) -> Fetched:
        """Run ``sql`` (in the driver's paramstyle) with ``params``; its rows go to ``sink`` while it takes them.

        Without a sink, every row is answered in ``Fetched.rows``.
        """


class PostgresRunner(Runner):
    """PostgreSQL: a read-only transaction with a local statement timeout, rolled back."""

    async def run(
        self, engine: AsyncEngine, sql: str, params: Any, timeout: float, reads: Reads, sink: RowSink | None = None
    ) -> Fetched:
        """See ``Runner.run``."""
        async with engine.connect() as conn:
            # A real transaction even on an AUTOCOMMIT engine: outside one, the SETs do nothing.
            await conn.execution_options(isolation_level="READ COMMITTED")
            try:
                await conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                await conn.exec_driver_sql(f"SET LOCAL statement_timeout = {_milliseconds(timeout)}")
                # The quoting the guard's SQL was written for (see the module docstring).
                await conn.exec_driver_sql("SET LOCAL standard_conforming_strings = on")
                held = (await conn.exec_driver_sql(_PG_SETTINGS)).one()
                if tuple(held) != ("on", "on"):
                    raise RuntimeError("the data tool could not open a read-only transaction with standard strings")
                if conn.dialect.driver == "asyncpg":
                    return await _execute_asyncpg(conn, sql, params, sink)
                return await _execute(conn, sql, params, sink)
            finally:
                await conn.rollback()


class MysqlRunner(Runner):
    """MySQL and MariaDB: the next transaction read-only, the statement's own time limit, rolled back."""

    async def run(
        self, engine: AsyncEngine, sql: str, params: Any, timeout: float, reads: Reads, sink: RowSink | None = None
    ) -> Fetched:
        """See ``Runner.run``."""
        async with engine.connect() as conn:
            # A real transaction even on an AUTOCOMMIT engine (SET TRANSACTION names the next one).
            await conn.execution_options(isolation_level="REPEATABLE READ")
            try:
                await conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                # Known once the dialect has met the server (its first connection).
                if getattr(conn.dialect, "is_mariadb", False):
                    statement = f"SET STATEMENT max_statement_time={timeout:.3f} FOR {sql}"
                    return await _execute(conn, statement, params, sink)
                await conn.exec_driver_sql(f"SET SESSION max_execution_time = {_milliseconds(timeout)}")
                try:
                    return await _execute(conn, sql, params, sink)
                finally:
                    await conn.exec_driver_sql("SET SESSION max_execution_time = DEFAULT")
            finally:
                await conn.rollback()


class SqliteRunner(Runner):
    """SQLite (aiosqlite): ``query_only`` on the connection and a deadline in its progress handler."""

    async def run(
        self, engine: AsyncEngine, sql: str, params: Any, timeout: float, reads: Reads, sink: RowSink | None = None
    ) -> Fetched:
        """See ``Runner.run``."""
        async with engine.connect() as conn:
            raw = await conn.get_raw_connection()
            driver: Any = raw.driver_connection  # the aiosqlite.Connection
            previous = (await conn.exec_driver_sql("PRAGMA query_only")).scalar()
            await conn.exec_driver_sql("PRAGMA query_only = ON")
            try:
                deadline = time.monotonic() + timeout
                # Called in aiosqlite's thread between steps of the statement; non-zero aborts it.
                await driver.set_progress_handler(lambda: int(time.monotonic() > deadline), _SQLITE_STEPS)
                await driver.set_authorizer(reads.authorizer())
                try:
                    return await _execute(conn, sql, params, sink)
                finally:
                    await driver.set_authorizer(None)
                    await driver.set_progress_handler(None, 0)
            except BaseException:
                # Cancelled (the caller's last-resort timeout) or failed mid-way: the connection may
                # still hold our authorizer and query_only, so it never goes back to the app's pool.
                await _discard(conn)
                raise
            finally:
                if not conn.invalidated:
                    await conn.rollback()
                    await conn.exec_driver_sql(f"PRAGMA query_only = {1 if previous else 0}")


async def _discard(conn: AsyncConnection) -> None:
    """Invalidate ``conn`` (closed, not pooled again), whatever state its driver is in."""
    try:
        await conn.invalidate()
    except Exception as exc:  # already gone: nothing of it goes back to the pool either
        logging.getLogger("tools.data").debug("invalidating a data tool connection failed: %s", exc)


def _milliseconds(timeout: float) -> int:
    return max(1, round(timeout * 1000))


def runner_for(dialect_name: str) -> Runner:
    """The runner for an SQLAlchemy dialect name (checked by the caller)."""
    if dialect_name == "postgresql":
        return PostgresRunner()
    if dialect_name == "sqlite":
        return SqliteRunner()
    return MysqlRunner()
