"""What the data tool answers when it may: rows, limits, budgets, tenants, roles, its description,
its ``DataTable``, a run's events, and the walls behind the guard.

Every test runs on PostgreSQL, SQLite and MariaDB (the ``db`` fixture), through the real
``ToolRegistry`` (or the real ``Runtime``), with the same seed (``conftest.py``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import tracemalloc
from typing import Any

import pytest
from sqlalchemy.exc import DBAPIError

import tools
from gateway import Runtime, Turn
from gateway.events import ToolCompletedEvent, ToolFailedEvent, ToolStartedEvent, UiEvent
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest, ToolMessage
from renderers import DataTableProps, Renderer, default_catalog
from tests.data_tool.conftest import Db
from tools._data._dialects import is_denied_function
from tools._data._runners import Reads, runner_for

ACCESS = {
    "analyst": {"sales": ["orders", "customers", "order_totals"], "catalog": ["products", "big"]},
    "support": {"service": ["customers"]},
}
T1 = tools.Actor("u1", ["analyst"], "t1")
T2 = tools.Actor("u2", ["analyst"], "t2")
SUPPORT = tools.Actor("s1", ["support"], "t1")
SHARED = ["products", "big"]
PLACEHOLDER = {"postgresql": "$1", "sqlite": "?", "mariadb": "%s"}
LABEL = {"postgresql": "PostgreSQL", "sqlite": "SQLite", "mariadb": "MariaDB"}


def make(db: Db, **options: Any) -> tools.Tool:
    options.setdefault("tenant_column", "tenant_id")
    options.setdefault("shared_tables", SHARED)
    return tools.data_tool(db.engine, ACCESS, **options)


async def call(tool: tools.Tool, sql: str, actor: tools.Actor = T1) -> dict[str, Any]:
    registry = tools.ToolRegistry([tool], transient_retry=None)
    output: dict[str, Any] = await registry.invoke(tool.name, {"sql": sql}, tools.ToolContext(actor=actor))
    return output


def qualified(db: Db, table: str) -> str:
    return f"`{db.default_schema}`.`{table}`" if db.kind == "mariadb" else f'"{db.default_schema}"."{table}"'


# -- the guard off the loop ---------------------------------------------------------------------------


async def test_a_long_query_is_checked_off_the_event_loop(db: Db) -> None:
    registry = tools.ToolRegistry([make(db)], transient_retry=None)
    assert [d.name for d in await registry.definitions_for(T1)] == ["execute_sql"]  # reflected: nothing else awaits
    cases = ", ".join(f"CASE WHEN id = {i} THEN {i} END" for i in range(400))
    sql = f"SELECT {cases} FROM secret_table"  # parsed to its end, then refused: it never reaches the database
    invoked = asyncio.ensure_future(registry.invoke("execute_sql", {"sql": sql}, tools.ToolContext(actor=T1)))
    turns = 0
    while not invoked.done():  # the loop turns while sqlglot works (on the loop, the call was done in one turn)
        turns += 1
        await asyncio.sleep(0)
    with pytest.raises(tools.ToolFailed, match="secret_table is not one you may query"):
        await invoked
    assert turns > 1


# -- rows -------------------------------------------------------------------------------------------


async def test_an_allowed_query_answers_the_callers_rows(db: Db) -> None:
    tool = make(db)
    output = await call(tool, "SELECT id, total, status FROM orders ORDER BY id")
    assert output == {
        "sql": output["sql"],
        "columns": ["id", "total", "status"],
        "rows": [[1, 10.5, "paid"], [2, 20, "open"], [3, 5.25, "paid"]],
        "row_count": 3,
        "truncated": False,
        "note": None,
    }
    # The SQL that ran: the table by its exact name, filtered by a bound parameter, limited.
    assert f"FROM {qualified(db, 'orders')} WHERE" in output["sql"]
    assert f"= {PLACEHOLDER[db.kind]})" in output["sql"] and output["sql"].endswith("LIMIT 100")
    assert "'t1'" not in output["sql"]
    other = await call(tool, "SELECT id, total FROM orders ORDER BY id", T2)
    assert other["rows"] == [[4, 99.99], [5, 1]]


async def test_joins_ctes_aggregates_and_views_read_as_written(db: Db) -> None:
    tool = make(db)
    joined = await call(
        tool,
        "WITH spend AS (SELECT customer_id, SUM(total) AS spent FROM orders GROUP BY customer_id) "
        "SELECT c.name, s.spent FROM customers AS c JOIN spend AS s ON s.customer_id = c.id ORDER BY c.name",
    )
    assert joined["rows"] == [["Ada", 30.5], ["Bo", 5.25]]
    view = await call(tool, "SELECT customer_id, total, orders FROM order_totals ORDER BY customer_id")
    assert view["rows"] == [[1, 30.5, 2], [2, 5.25, 1]]
    recursive = await call(
        tool, "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r"
    )
    assert recursive["rows"] == [[1], [2], [3]]
    shared = await call(tool, "SELECT name, price FROM products ORDER BY id", T2)
    assert shared["rows"] == [["Pen", 1.5], ["Ink", 3]]


async def test_the_limit_is_injected_lowered_or_kept(db: Db) -> None:
    tool = make(db, max_rows=10)
    injected = await call(tool, "SELECT n FROM big ORDER BY n")
    assert injected["rows"] == [[n] for n in range(1, 11)] and injected["sql"].endswith("LIMIT 10")
    assert "stopped at the limit of 10 rows" in injected["note"]
    lowered = await call(tool, "SELECT n FROM big ORDER BY n LIMIT 500")
    assert len(lowered["rows"]) == 10 and lowered["sql"].endswith("LIMIT 10")
    computed = await call(tool, "SELECT n FROM big ORDER BY n LIMIT (SELECT 1000)")
    assert len(computed["rows"]) == 10 and computed["sql"].endswith("LIMIT 10")
    kept = await call(tool, "SELECT n FROM big ORDER BY n LIMIT 3")
    assert kept["rows"] == [[1], [2], [3]] and kept["note"] is None and kept["sql"].endswith("LIMIT 3")
    offset = await call(tool, "SELECT n FROM big ORDER BY n LIMIT 5 OFFSET 100")
    assert offset["rows"] == [[n] for n in range(101, 106)]
    union = await call(tool, "SELECT n FROM big WHERE n < 8 UNION ALL SELECT n FROM big WHERE n > 1990 ORDER BY 1")
    assert union["rows"] == [[n] for n in [1, 2, 3, 4, 5, 6, 7, 1991, 1992, 1993]]


async def test_results_are_cut_to_the_byte_budget_with_a_note(db: Db) -> None:
    tool = make(db, max_rows=500, max_bytes=1_000)
    output = await call(tool, "SELECT n, n * 2 AS twice FROM big ORDER BY n")
    assert len(json.dumps(output)) <= 1_000
    assert 10 < output["row_count"] < 100 and output["truncated"] is True
    assert output["rows"] == [[n, 2 * n] for n in range(1, output["row_count"] + 1)]
    assert f"Only the first {output['row_count']} rows are included" in output["note"]
    assert "cut to fit 1,000 bytes" in output["note"]
    long = await call(
        make(db, max_cell_chars=20), "SELECT 'abcdefghijklmnopqrstuvwxyz0123456789' AS long FROM products"
    )
    assert long["rows"] == [["abcdefghijklmnopqrs…"], ["abcdefghijklmnopqrs…"]]
    assert long["truncated"] is True and "longer than 20 characters were cut" in long["note"]


PAD = {
    "postgresql": " || ".join(["repeat('x', 10000)"] * 10),
    "sqlite": " || ".join(["hex(zeroblob(10000))"] * 5),
    "mariadb": "CONCAT(" + ", ".join(["REPEAT('x', 10000)"] * 10) + ")",
}
"""A value of 100,000 characters, in each dialect (each made part within the guard's 10,000)."""


async def test_rows_past_the_byte_budget_are_not_read_into_memory(db: Db) -> None:
    # 2,000 rows of 100 kB (200 MB) for an answer of 16 kB: only what fits (and the database's
    # last batch of rows) is ever held, whatever max_rows allows.
    tool = make(db, max_rows=2_000)
    tracemalloc.start()
    try:
        output = await call(tool, f"SELECT n, {PAD[db.kind]} AS pad FROM big ORDER BY n")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 30 * 2**20, f"{peak / 2**20:.0f} MB held for an answer of 16 kB"
    assert output["truncated"] is True and len(json.dumps(output)) <= 16_000
    assert [row[0] for row in output["rows"]] == list(range(1, output["row_count"] + 1))
    assert f"Only the first {output['row_count']} rows are included" in output["note"]


# -- tenants and roles ------------------------------------------------------------------------------


async def test_tenant_scoping_returns_only_the_actors_rows(db: Db) -> None:
    tool = make(db)
    for actor, names in ((T1, ["Ada", "Bo"]), (T2, ["Cy"])):
        output = await call(
            tool, "SELECT name FROM customers WHERE tenant_id IN ('t1', 't2') OR 1 = 1 ORDER BY name", actor
        )
        assert [row[0] for row in output["rows"]] == names
    totals = await call(tool, "SELECT tenant_id, SUM(total) AS total FROM order_totals GROUP BY tenant_id", T2)
    assert totals["rows"] == [["t2", 100.99]]
    with pytest.raises(tools.ToolNotFoundError, match="not available"):  # not offered to them: never runs
        await call(tool, "SELECT name FROM products", tools.Actor("nobody", ["analyst"]))


async def test_an_integer_tenant_column_is_compared_with_a_number(tmp_path: Any) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'numbers.db'}")
    try:
        async with engine.begin() as conn:
            await conn.exec_driver_sql("CREATE TABLE ledger (id integer PRIMARY KEY, shop integer, amount integer)")
            await conn.exec_driver_sql("INSERT INTO ledger VALUES (1, 7, 100), (2, 8, 200)")
        tool = tools.data_tool(engine, {"clerk": {"books": ["ledger"]}}, tenant_column="shop")
        output = await call(tool, "SELECT id, amount FROM ledger", tools.Actor("c", ["clerk"], "7"))
        assert output["rows"] == [[1, 100]]
        with pytest.raises(tools.ToolFailed, match="holds numbers"):
            await call(tool, "SELECT id FROM ledger", tools.Actor("c", ["clerk"], "shop-seven"))
    finally:
        await engine.dispose()


async def test_roles_select_the_groups(db: Db) -> None:
    tool = make(db)
    registry = tools.ToolRegistry([tool], transient_retry=None)
    support = await registry.definitions_for(SUPPORT)
    assert [d.name for d in support] == ["execute_sql"]
    assert "- customers (" in support[0].description and "orders" not in support[0].description
    with pytest.raises(
        tools.SqlRefusedError, match=r"table orders is not one you may query \(you may query: customers\)"
    ):
        await call(tool, "SELECT * FROM orders", SUPPORT)
    assert (await call(tool, "SELECT name FROM customers ORDER BY id", SUPPORT))["rows"] == [["Ada"], ["Bo"]]
    stranger = tools.Actor("x", ["member"], "t1")
    assert await registry.definitions_for(stranger) == []
    with pytest.raises(tools.ToolForbiddenError):
        await call(tool, "SELECT name FROM customers", stranger)
    both = tools.Actor("b", ["support", "analyst"], "t1")
    description = (await registry.definitions_for(both))[0].description
    assert "service:\n- customers (" in description and "sales:\n- orders (" in description


async def test_a_caller_without_a_tenant_is_not_offered_per_tenant_data(db: Db) -> None:
    """Every call would be refused (even of shared tables only): the tool is not listed for them at all."""
    registry = tools.ToolRegistry([make(db)], transient_retry=None)
    assert await registry.definitions_for(tools.Actor("nobody", ["analyst"])) == []
    assert [d.name for d in await registry.definitions_for(T1)] == ["execute_sql"]
    unscoped = tools.ToolRegistry([make(db, tenant_column=None, shared_tables=[])], transient_retry=None)
    assert [d.name for d in await unscoped.definitions_for(tools.Actor("nobody", ["analyst"]))] == ["execute_sql"]


async def test_a_small_made_value_still_runs(db: Db) -> None:
    padded = "printf('%8s', name)" if db.kind == "sqlite" else "lpad(name, 8, ' ')"  # SQLite has no lpad
    answer = await call(make(db), f"SELECT {padded} AS padded FROM products ORDER BY id LIMIT 1", T1)
    [[value]] = answer["rows"]
    assert len(value) == 8 and value.startswith(" ") and value.strip(), value


async def test_the_description_lists_the_schema_of_the_callers_tables(db: Db) -> None:
    tool = make(db)
    described = (await tools.ToolRegistry([tool]).definitions_for(T1))[0]
    text = described.description
    assert f"Write {LABEL[db.kind]} SQL: one SELECT statement" in text
    assert "At most 100 rows come back" in text and "limited to the caller's own (column tenant_id)" in text
    assert "sales:\n- orders (id INTEGER, tenant_id " in text and "customer_id INTEGER, total " in text
    assert "\n- order_totals (tenant_id " in text and "catalog:\n- products (id INTEGER, name " in text
    assert "secret" not in text and "canary" not in text
    assert described.parameters["required"] == ["sql"]
    assert "orders" not in tool.description  # the static description: rules only, no tables


# -- what people see --------------------------------------------------------------------------------


async def test_present_draws_a_data_table_the_renderer_accepts(db: Db) -> None:
    tool = make(db)
    ctx = tools.ToolContext(actor=T1)
    output = await call(
        tool,
        "SELECT c.name, o.total, o.id AS id, c.id AS id FROM orders o JOIN customers c ON c.id = o.customer_id "
        "ORDER BY o.id",
    )
    shown = await tools.ToolRegistry([tool]).present(tool, output, ctx)
    assert [c.component for c in shown] == ["DataTable"]
    props = DataTableProps.model_validate(shown[0].props)
    assert [(c.key, c.label, c.alignment) for c in props.columns] == [
        ("name", "name", "left"), ("total", "total", "right"), ("id", "id", "right"), ("id_2", "id", "right"),
    ]  # fmt: skip
    assert props.rows[0] == {"name": "Ada", "total": 10.5, "id": 1, "id_2": 1}
    html = (await Renderer(default_catalog()).render("DataTable", shown[0].props, "html")).data
    assert isinstance(html, str) and "Ada" in html and "Bo" in html and "Cy" not in html


async def test_a_run_shows_the_table_and_the_sql_in_the_tool_line(db: Db) -> None:
    model = ScriptedModel(
        [
            ScriptStep(tool_calls=[ToolCallRequest(name="execute_sql", args={"sql": "SELECT name FROM customers"})]),
            ScriptStep(tool_calls=[ToolCallRequest(name="execute_sql", args={"sql": "SELECT * FROM secret"})]),
            ScriptStep(text="Ada and Bo."),
        ]
    )
    runtime = Runtime(tools=[make(db)], model=model)
    try:
        run_id = await runtime.start_turn(Turn(thread_id="th-data", actor=T1, text="Who are my customers?"))
        assert await runtime.wait(run_id, timeout=10) == "completed"
        events = [e async for e in runtime.events("th-data", 0)]
    finally:
        await runtime.aclose()
    started = [e for e in events if isinstance(e, ToolStartedEvent)]
    assert [(e.label, e.running, e.input) for e in started][0] == (
        "Data query", "Querying the data", {"sql": "SELECT name FROM customers"},
    )  # fmt: skip
    ui = [e for e in events if isinstance(e, UiEvent)]
    assert [(e.component, e.props["rows"]) for e in ui] == [("DataTable", [{"name": "Ada"}, {"name": "Bo"}])]
    completed = [e for e in events if isinstance(e, ToolCompletedEvent)]
    assert len(completed) == 1 and completed[0].done == "Queried the data"
    assert completed[0].result == {"kind": "elsewhere"}  # the table is drawn; the details list the output
    assert completed[0].output["sql"].startswith('SELECT "name" FROM') or "`name`" in completed[0].output["sql"]
    failed = [e for e in events if isinstance(e, ToolFailedEvent)]
    assert (
        failed[0].error["code"] == "sql_refused"
        and "table secret is not one you may query" in failed[0].error["message"]
    )
    # The model read both: the rows, then the refusal.
    results = [m for m in model.requests[2].messages if isinstance(m, ToolMessage)]
    assert json.loads(results[0].content)["rows"] == [["Ada"], ["Bo"]]
    assert "table secret is not one you may query" in json.loads(results[1].content)["error"]["message"]


# -- the walls behind the guard ---------------------------------------------------------------------


async def _active_queries(db: Db) -> list[Any]:
    async with db.engine.connect() as conn:
        if db.kind == "postgresql":
            sql = (
                "SELECT query FROM pg_stat_activity WHERE datname = current_database() "
                "AND state = 'active' AND pid <> pg_backend_pid()"
            )
        elif db.kind == "mariadb":
            sql = (
                "SELECT info FROM information_schema.processlist WHERE db = DATABASE() "
                "AND command = 'Query' AND id <> CONNECTION_ID()"
            )
        else:
            return []
        return list((await conn.exec_driver_sql(sql)).fetchall())


async def test_a_query_past_its_timeout_is_stopped_on_the_server(db: Db) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    # One pooled connection: the call after the timeout gets the very connection it ran on.
    engine = create_async_engine(db.engine.url, pool_size=1, max_overflow=0)
    try:
        tool = tools.data_tool(engine, ACCESS, tenant_column="tenant_id", shared_tables=SHARED, timeout=0.5)
        started = time.monotonic()
        with pytest.raises(tools.ToolFailed, match="ran past its time limit of 0.5 s") as raised:
            await call(tool, "SELECT count(*) FROM big a, big b, big c, big d")
        assert raised.value.code == "sql_timeout" and time.monotonic() - started < 2.0
        assert await _active_queries(db) == []
        assert (await call(tool, "SELECT count(*) AS n FROM big"))["rows"] == [[2000]]
        if db.kind == "sqlite":
            async with engine.connect() as conn:
                assert (await conn.exec_driver_sql("PRAGMA query_only")).scalar() == 0
    finally:
        await engine.dispose()


async def test_the_database_refuses_what_would_slip_past_the_guard(db: Db) -> None:
    before = await db.fingerprint()
    runner = runner_for(db.engine.dialect.name)
    reads = Reads(
        tables=frozenset({(db.default_schema.lower(), "orders")}), denied_function=lambda name: is_denied_function(name)
    )
    with pytest.raises(DBAPIError, match="read-only|READ ONLY|not authorized|readonly"):
        await runner.run(db.engine, "INSERT INTO canary VALUES (7, 'x')", None, 1.0, reads)
    with pytest.raises(DBAPIError, match="read-only|READ ONLY|not authorized|readonly"):
        await runner.run(db.engine, "UPDATE canary SET value = 'dead'", None, 1.0, reads)
    if db.kind == "sqlite":  # its authorizer holds the allow-list too
        with pytest.raises(DBAPIError, match="access to secret.token is prohibited"):
            await runner.run(db.engine, "SELECT token FROM secret", None, 1.0, reads)
        with pytest.raises(DBAPIError, match="not authorized"):
            await runner.run(db.engine, "SELECT load_extension('x')", None, 1.0, reads)
        fetched = await runner.run(db.engine, "SELECT count(*) FROM orders", None, 1.0, reads)
        assert fetched.rows == [(5,)]
    assert await db.fingerprint() == before


async def test_an_autocommit_engine_still_reads_in_a_read_only_transaction_with_a_time_limit(db: Db) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(db.engine.url, isolation_level="AUTOCOMMIT")
    try:
        before = await db.fingerprint()
        reads = Reads(tables=frozenset(), denied_function=is_denied_function)
        with pytest.raises(DBAPIError, match="read-only|READ ONLY|not authorized"):
            await runner_for(engine.dialect.name).run(engine, "DELETE FROM canary", None, 1.0, reads)
        tool = tools.data_tool(engine, ACCESS, tenant_column="tenant_id", shared_tables=SHARED, timeout=0.5)
        with pytest.raises(tools.ToolFailed, match="ran past its time limit"):
            await call(tool, "SELECT count(*) FROM big a, big b, big c, big d")
        assert (await call(tool, "SELECT id FROM orders ORDER BY id"))["rows"] == [[1], [2], [3]]
        assert await db.fingerprint() == before
    finally:
        await engine.dispose()


# -- mistakes of the developer ----------------------------------------------------------------------

SYSTEM = {"postgresql": "pg_catalog.pg_class", "sqlite": "sqlite_master", "mariadb": "mysql.user"}


async def test_construction_names_each_mistake(db: Db) -> None:
    def refused(match: str, *args: Any, **kwargs: Any) -> None:
        with pytest.raises(tools.UserError, match=match):
            tools.data_tool(*args, **kwargs)

    refused("must be an SQLAlchemy AsyncEngine", "sqlite:///x.db", ACCESS)
    refused(r"a non-empty \{role: \{group: \[tables\]\}\} mapping is required \(no allow-all\)", db.engine, {})
    refused("needs a non-empty {group: \\[tables\\]} mapping", db.engine, {"analyst": ["orders"]})
    refused("needs a non-empty list of tables", db.engine, {"analyst": {"sales": "orders"}})
    refused("'orders o' is not a table name", db.engine, {"analyst": {"sales": ["orders o"]}})
    refused("is a system catalog", db.engine, {"analyst": {"sales": ["orders", SYSTEM[db.kind]]}})
    refused("names tables the allow-list does not: secret", db.engine, ACCESS, shared_tables=["secret"])
    refused("unknown option", db.engine, ACCESS, kind="action")
    refused(r"max_rows must be an int in \[1, 10000\]", db.engine, ACCESS, max_rows=0)
    refused("timeout must be a number", db.engine, ACCESS, timeout=-1)


async def test_a_misconfigured_table_withholds_the_tool_with_one_log_line(
    db: Db, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tools.data")
    missing = tools.data_tool(db.engine, {"analyst": {"sales": ["orders", "no_such_table"]}})
    assert await tools.ToolRegistry([missing]).definitions_for(T1) == []
    unscoped = tools.data_tool(db.engine, {"analyst": {"sales": ["orders", "secret"]}}, tenant_column="tenant_id")
    assert await tools.ToolRegistry([unscoped]).definitions_for(T1) == []
    lines = [r for r in caplog.records if r.name == "tools.data"]
    assert [r.exc_info for r in lines] == [None, None]
    assert "'no_such_table' is not in schema" in lines[0].getMessage()
    assert "table 'secret' has no column 'tenant_id'; list it in shared_tables" in lines[1].getMessage()
