"""Real databases for the data tool: PostgreSQL, SQLite and MariaDB, each seeded the same way.

Each database is created for the test session and dropped after it: PostgreSQL and MariaDB as a
database of their own on the local servers (127.0.0.1:5432, user postgres; 127.0.0.1:3306, user
root), SQLite as a file. Every test builds its own ``AsyncEngine`` on it (engines are bound to
the event loop that uses them).

The seed: ``orders`` and ``customers`` hold rows of tenants ``t1`` and ``t2``; ``products`` and
``big`` (2,000 numbers) are shared; ``secret`` and ``canary`` are never listed; the views
``order_totals`` (listed) and ``secret_view`` (not listed). ``fingerprint()`` reads every table,
view and sequence the way a test can compare before and after a hostile query.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
MARIADB_HOST, MARIADB_PORT = "127.0.0.1", 3306

ORDERS = [
    (1, "t1", 1, "10.50", "paid", "first order"),
    (2, "t1", 1, "20.00", "open", "second"),
    (3, "t1", 2, "5.25", "paid", "third"),
    (4, "t2", 3, "99.99", "paid", "other tenant"),
    (5, "t2", 3, "1.00", "open", "other tenant again"),
]
CUSTOMERS = [(1, "t1", "Ada", "ada@t1.example"), (2, "t1", "Bo", "bo@t1.example"), (3, "t2", "Cy", "cy@t2.example")]
BIG_ROWS = 2_000
TABLES = ("orders", "customers", "products", "big", "secret", "canary")

_DDL = {
    "postgresql": [
        "CREATE SCHEMA private",
        "CREATE TABLE private.orders (id integer, tenant_id text, total numeric(10,2))",
        "CREATE SEQUENCE orders_seq",
    ],
    "sqlite": [],
    "mariadb": [],
}
_TYPES = {
    "postgresql": {"text": "text", "money": "numeric(10,2)"},
    "sqlite": {"text": "TEXT", "money": "NUMERIC"},
    "mariadb": {"text": "VARCHAR(200)", "money": "DECIMAL(10,2)"},
}


def _schema_ddl(kind: str) -> list[str]:
    t, money = _TYPES[kind]["text"], _TYPES[kind]["money"]
    return [
        *_DDL[kind],
        f"CREATE TABLE orders (id integer PRIMARY KEY, tenant_id {t} NOT NULL, customer_id integer, "
        f"total {money}, status {t}, note {t})",
        f"CREATE TABLE customers (id integer PRIMARY KEY, tenant_id {t} NOT NULL, name {t}, email {t})",
        f"CREATE TABLE products (id integer PRIMARY KEY, name {t}, price {money})",
        "CREATE TABLE big (n integer PRIMARY KEY)",
        f"CREATE TABLE secret (id integer PRIMARY KEY, token {t})",
        f"CREATE TABLE canary (id integer PRIMARY KEY, value {t})",
        "CREATE VIEW order_totals AS SELECT tenant_id, customer_id, SUM(total) AS total, COUNT(*) AS orders "
        "FROM orders GROUP BY tenant_id, customer_id",
        "CREATE VIEW secret_view AS SELECT id, token FROM secret",
    ]


async def _seed(engine: AsyncEngine, kind: str) -> None:
    async with engine.begin() as conn:
        for statement in _schema_ddl(kind):
            await conn.execute(text(statement))
        await conn.execute(
            text("INSERT INTO orders VALUES (:id, :tenant, :customer, :total, :status, :note)"),
            [dict(zip(("id", "tenant", "customer", "total", "status", "note"), row, strict=True)) for row in ORDERS],
        )
        await conn.execute(
            text("INSERT INTO customers VALUES (:id, :tenant, :name, :email)"),
            [dict(zip(("id", "tenant", "name", "email"), row, strict=True)) for row in CUSTOMERS],
        )
        await conn.execute(text("INSERT INTO products VALUES (1, 'Pen', 1.50), (2, 'Ink', 3.00)"))
        await conn.execute(text("INSERT INTO big VALUES (:n)"), [{"n": n} for n in range(1, BIG_ROWS + 1)])
        await conn.execute(text("INSERT INTO secret VALUES (1, 's3cr3t')"))
        await conn.execute(text("INSERT INTO canary VALUES (1, 'alive'), (2, 'still alive')"))


def _run(make: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run set-up or tear-down on a loop of its own (a session fixture may be first asked for
    from inside a test's running loop, where ``asyncio.run`` is refused)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(lambda: asyncio.run(make())).result()


def _reachable(host: str, port: int, what: str) -> None:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError as exc:
        pytest.fail(f"no {what} answers at {host}:{port}: {exc}")


@pytest.fixture(scope="session")
def data_pg_url() -> Iterator[str]:
    """A PostgreSQL database of this session's own, seeded; dropped at the end."""
    _reachable("127.0.0.1", 5432, "PostgreSQL")
    name = f"agora_datatool_{uuid.uuid4().hex[:10]}"

    async def create() -> None:
        admin = await asyncpg.connect(PG_ADMIN)
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        engine = create_async_engine(f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}")
        try:
            await _seed(engine, "postgresql")
        finally:
            await engine.dispose()

    async def drop() -> None:
        admin = await asyncpg.connect(PG_ADMIN)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()

    _run(create)
    try:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    finally:
        _run(drop)


@pytest.fixture(scope="session")
def data_sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A seeded SQLite file of this session's own."""
    path: Path = tmp_path_factory.mktemp("data_tool") / "shop.db"
    url = f"sqlite+aiosqlite:///{path}"

    async def create() -> None:
        engine = create_async_engine(url)
        try:
            await _seed(engine, "sqlite")
        finally:
            await engine.dispose()

    _run(create)
    return url


@pytest.fixture(scope="session")
def data_mariadb_url() -> Iterator[str]:
    """A MariaDB database of this session's own (``agora_datatool_...``), seeded; dropped at the end."""
    _reachable(MARIADB_HOST, MARIADB_PORT, "MariaDB")
    name = f"agora_datatool_{uuid.uuid4().hex[:10]}"
    server = f"mysql+aiomysql://root@{MARIADB_HOST}:{MARIADB_PORT}/test"
    url = f"mysql+aiomysql://root@{MARIADB_HOST}:{MARIADB_PORT}/{name}"

    async def on_server(statement: str) -> None:
        engine = create_async_engine(server, isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as conn:
                await conn.exec_driver_sql(statement)
        finally:
            await engine.dispose()

    async def create() -> None:
        await on_server(f"CREATE DATABASE `{name}`")
        engine = create_async_engine(url)
        try:
            await _seed(engine, "mariadb")
        finally:
            await engine.dispose()

    _run(create)
    try:
        yield url
    finally:
        _run(lambda: on_server(f"DROP DATABASE IF EXISTS `{name}`"))


@dataclass(frozen=True, kw_only=True)
class Db:
    """One seeded database, as a test sees it."""

    kind: str
    """``postgresql``, ``sqlite`` or ``mariadb``."""
    engine: AsyncEngine
    default_schema: str

    async def fingerprint(self) -> dict[str, Any]:
        """Every table and view name, each seeded table's row count and content digest, sequences."""
        async with self.engine.connect() as conn:

            def names(sync_conn: Any) -> tuple[list[str], list[str]]:
                inspector = inspect(sync_conn)
                return sorted(inspector.get_table_names()), sorted(inspector.get_view_names())

            tables, views = await conn.run_sync(names)
            seen = {"tables": tables, "views": views}
            for table in TABLES:
                rows = (await conn.exec_driver_sql(f"SELECT * FROM {table} ORDER BY 1")).fetchall()
                digest = hashlib.sha256(repr([tuple(map(str, row)) for row in rows]).encode()).hexdigest()
                seen[table] = (len(rows), digest)
            if self.kind == "postgresql":
                seen["orders_seq"] = (
                    await conn.exec_driver_sql("SELECT last_value, is_called FROM orders_seq")
                ).fetchone()
            await conn.rollback()
        return seen


_URL_FIXTURES = {"postgresql": "data_pg_url", "sqlite": "data_sqlite_url", "mariadb": "data_mariadb_url"}
_DEFAULT_SCHEMA = {"postgresql": "public", "sqlite": "main"}


@pytest.fixture(params=list(_URL_FIXTURES))
async def db(request: pytest.FixtureRequest) -> AsyncIterator[Db]:
    """The test once on each database (its own engine, disposed after)."""
    kind: str = request.param
    url: str = request.getfixturevalue(_URL_FIXTURES[kind])
    engine = create_async_engine(url)
    default = _DEFAULT_SCHEMA.get(kind) or url.rsplit("/", 1)[1]
    try:
        yield Db(kind=kind, engine=engine, default_schema=default)
    finally:
        await engine.dispose()
