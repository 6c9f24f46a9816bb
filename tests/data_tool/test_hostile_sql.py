"""The hostile-SQL table, on PostgreSQL, SQLite and MariaDB: every case refused (or contained), and
the database unchanged.

Each case runs through the real ``ToolRegistry`` as a caller of tenant ``t1`` with the ``analyst``
role, on an engine connected as the database's superuser (the tool's own walls are what is
tested). Before and after, ``fingerprint()`` reads every table and view name, each seeded table's
row count and content digest, and the sequence: no case may change any of them. A refusal is
also exactly one log line, without a traceback.
"""

from __future__ import annotations

import logging
import re
import time

import pytest

import tools
from tests.data_tool._cases import CASES, FORBIDDEN, KINDS, Case
from tests.data_tool.conftest import Db

ACCESS = {"analyst": {"sales": ["orders", "customers", "order_totals"], "catalog": ["products", "big"]}}
T1 = tools.Actor("u1", ["analyst"], "t1")
TIMEOUT = 1.0


def _params() -> list[object]:
    return [pytest.param(kind, case, id=f"{kind}-{case.id}") for kind in KINDS for case in CASES]


def test_the_table_holds_at_least_forty_hostile_cases_per_database() -> None:
    refused = [case for case in CASES if case.reason is not None]
    assert len(CASES) >= 40 and len(refused) >= 40
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize(("db", "case"), _params(), indirect=["db"])
async def test_hostile_sql(db: Db, case: Case, caplog: pytest.LogCaptureFixture) -> None:
    tool = tools.data_tool(
        db.engine, ACCESS, tenant_column="tenant_id", shared_tables=["products", "big"], timeout=TIMEOUT
    )
    registry = tools.ToolRegistry([tool], transient_retry=None)
    ctx = tools.ToolContext(actor=T1)
    assert [d.name for d in await registry.definitions_for(T1)] == ["execute_sql"]  # reflected before the fingerprint
    before = await db.fingerprint()
    sql = case.sql.replace("{schema}", db.default_schema)
    code, reason = case.expected(db.kind)
    caplog.set_level(logging.INFO, logger="tools.data")
    caplog.clear()
    started = time.monotonic()
    if reason is None:
        output = await registry.invoke("execute_sql", {"sql": sql}, ctx)
        assert output["rows"], "a contained case must still answer the caller's own rows"
        seen = {str(value) for row in output["rows"] for value in row}
        assert seen.isdisjoint(FORBIDDEN), seen
        if "tenant_id" in output["columns"]:
            at = output["columns"].index("tenant_id")
            assert {row[at] for row in output["rows"]} == {"t1"}
        assert "secret" not in output["sql"] and "/*" not in output["sql"] and "--" not in output["sql"]
    else:
        with pytest.raises(tools.ToolFailed) as raised:
            await registry.invoke("execute_sql", {"sql": sql}, ctx)
        assert raised.value.code == code, str(raised.value)
        assert re.search(reason, str(raised.value)), str(raised.value)
        lines = [r for r in caplog.records if r.name == "tools.data"]
        assert len(lines) == 1 and lines[0].exc_info is None, [r.getMessage() for r in lines]
        if code == "sql_timeout":
            assert time.monotonic() - started < TIMEOUT + 1.5  # stopped by the database, not by the grace
    assert await db.fingerprint() == before
