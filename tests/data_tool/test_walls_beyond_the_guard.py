"""Attacks the guard's tree checks cannot see, each on a real database: how the database reads the
SQL the guard wrote, and functions of stock extensions that read or destroy any table.

Found by a review of the data tool (issue 14). Each test runs the attack through the real
``ToolRegistry`` as the hostile-SQL table does, on PostgreSQL (the one database where these apply).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

import tools
from tests.data_tool.conftest import Db
from tests.data_tool.test_data_tool import ACCESS, SHARED, call

pytestmark = pytest.mark.postgres


@pytest.fixture
async def pg(data_pg_url: str) -> AsyncIterator[Db]:
    engine = create_async_engine(data_pg_url)
    try:
        yield Db(kind="postgresql", engine=engine, default_schema="public")
    finally:
        await engine.dispose()


def _tool(engine: AsyncEngine) -> tools.Tool:
    return tools.data_tool(engine, ACCESS, tenant_column="tenant_id", shared_tables=SHARED)


async def test_postgres_reads_the_sql_as_the_guard_wrote_it_even_without_standard_strings(
    pg: Db, data_pg_url: str
) -> None:
    # A server (or role, or database) set to standard_conforming_strings = off reads a backslash
    # in '...' as an escape. The guard writes $$x\$$ back as 'x\': the closing quote becomes an
    # escaped one, and what the guard checked as a string runs as SQL.
    engine = create_async_engine(data_pg_url, connect_args={"server_settings": {"standard_conforming_strings": "off"}})
    try:
        before = await pg.fingerprint()
        tool = _tool(engine)
        secret = await call(tool, "SELECT $$x\\$$ AS a, $$ , (SELECT token FROM secret) AS b --$$ AS c")
        assert secret["rows"] == [["x\\", " , (SELECT token FROM secret) AS b --"]], secret
        other = await call(tool, "SELECT $$x\\$$ AS a, $$ , tenant_id FROM public.orders --$$ AS c")
        assert other["rows"] == [["x\\", " , tenant_id FROM public.orders --"]], other
        assert await pg.fingerprint() == before
    finally:
        await engine.dispose()


@pytest.fixture
async def contrib(data_pg_url: str) -> None:
    """The session database with pg_surgery and pageinspect installed (contrib, as Debian ships them)."""
    connection = await asyncpg.connect(data_pg_url.replace("+asyncpg", ""))
    try:
        for extension in ("pg_surgery", "pageinspect"):
            await connection.execute(f"CREATE EXTENSION IF NOT EXISTS {extension}")
    finally:
        await connection.close()


@pytest.mark.usefixtures("contrib")
@pytest.mark.parametrize(
    ("sql", "name"),
    [
        # Kills rows of any table in place: neither READ ONLY nor the rollback brings them back.
        ("SELECT heap_force_kill('canary', '{\"(0,1)\"}')", "heap_force_kill"),
        ("SELECT heap_force_freeze('canary', '{\"(0,2)\"}')", "heap_force_freeze"),
        # Reads the raw pages (and index entries) of any table, listed or not.
        ("SELECT encode(get_raw_page('secret', 0), 'escape')", "get_raw_page"),
        ("SELECT bt_page_items('secret_pkey', 1)", "bt_page_items"),
        ("SELECT * FROM orders WHERE note = (SELECT encode(get_raw_page('secret', 0), 'hex'))", "get_raw_page"),
    ],
)
async def test_extension_functions_that_read_raw_pages_or_kill_rows_are_refused(pg: Db, sql: str, name: str) -> None:
    before = await pg.fingerprint()
    with pytest.raises(tools.ToolFailed, match=rf"the function {name}\(\) is not allowed") as refused:
        await call(_tool(pg.engine), sql)
    assert refused.value.code == "sql_refused"
    assert await pg.fingerprint() == before
