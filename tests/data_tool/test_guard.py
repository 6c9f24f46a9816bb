"""The guard alone (no database): the deny-lists in every dialect, CTE scopes, the final check, cells."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest

import tools
from tools._data._dialects import DENIED_FUNCTIONS, MYSQL, POSTGRES, SQLITE, SqlDialect
from tools._data._guard import AllowedTable, GuardPolicy, _verify, guard
from tools._data._results import json_cell

DIALECTS = {"postgres": POSTGRES, "sqlite": SQLITE, "mysql": MYSQL}
SCHEMA = {"postgres": "public", "sqlite": "main", "mysql": "shop"}


def policy(dialect: SqlDialect, *, scoped: bool = False) -> GuardPolicy:
    schema = SCHEMA[dialect.name]
    tables = {
        (dialect.lookup_key(schema, True), name): AllowedTable(
            schema=schema, name=name, label=name, tenant_column="tenant_id" if scoped else None
        )
        for name in ("orders", "customers")
    }
    return GuardPolicy(dialect=dialect, default_schema=schema, tables=tables, max_rows=50)


@pytest.mark.parametrize("dialect", list(DIALECTS.values()), ids=list(DIALECTS))
@pytest.mark.parametrize("name", sorted(DENIED_FUNCTIONS))
def test_every_denied_function_is_refused_in_every_dialect(dialect: SqlDialect, name: str) -> None:
    arguments = "" if name in ("version", "current_version") else "1"  # sqlglot knows these take none
    with pytest.raises(tools.SqlRefusedError, match=r"the function \w+\(\) is not allowed"):
        guard(f"SELECT {name}({arguments}) FROM orders", policy(dialect))


@pytest.mark.parametrize("dialect", list(DIALECTS.values()), ids=list(DIALECTS))
@pytest.mark.parametrize(
    "name", ["pg_sleep_for", "pg_ls_dir", "pg_terminate_backend", "pg_advisory_lock", "lo_export", "dblink_exec"]
)
def test_denied_prefixes_cover_the_families(dialect: SqlDialect, name: str) -> None:
    with pytest.raises(tools.SqlRefusedError, match=rf"the function {name}\(\) is not allowed"):
        guard(f"SELECT {name}('x') FROM orders", policy(dialect))


def test_the_applications_own_denied_functions_are_refused() -> None:
    own = GuardPolicy(
        dialect=POSTGRES, default_schema="public", tables=policy(POSTGRES).tables, max_rows=5,
        denied_functions=frozenset({"audit_peek"}),
    )  # fmt: skip
    with pytest.raises(tools.SqlRefusedError, match=r"audit_peek\(\) is not allowed"):
        guard("SELECT AUDIT_PEEK(id) FROM orders", own)
    assert guard("SELECT lower(status) FROM orders", own).tables == ("orders",)


@pytest.mark.parametrize(
    ("dialect", "sql", "reads"),
    [
        # A non-recursive CTE that names itself reads the table of that name (PostgreSQL, MySQL)...
        (POSTGRES, "WITH orders AS (SELECT * FROM orders) SELECT * FROM orders", ("orders",)),
        (MYSQL, "WITH orders AS (SELECT * FROM orders) SELECT * FROM orders", ("orders",)),
        # ...but itself in SQLite, which needs no RECURSIVE.
        (SQLITE, "WITH orders AS (SELECT * FROM orders) SELECT * FROM orders", ()),
        (POSTGRES, "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT * FROM r", ()),
        # An earlier CTE is visible to a later one; a later one is not (taken as a table).
        (POSTGRES, "WITH a AS (SELECT 1 AS x), b AS (SELECT * FROM a) SELECT * FROM b", ()),
        (SQLITE, "WITH a AS (SELECT * FROM customers), customers AS (SELECT 1) SELECT * FROM a", ("customers",)),
        # Case: PostgreSQL folds unquoted names only; a quoted CTE name does not match another case.
        (POSTGRES, 'WITH "Orders" AS (SELECT 1) SELECT * FROM "Orders" CROSS JOIN ORDERS', ("orders",)),
        (SQLITE, "WITH Mine AS (SELECT 1) SELECT * FROM MINE", ()),
        # A CTE of a subquery is not visible outside it.
        (POSTGRES, "SELECT * FROM orders WHERE EXISTS (WITH orders AS (SELECT 1) SELECT * FROM orders)", ("orders",)),
    ],
)
def test_cte_names_follow_each_databases_scope(dialect: SqlDialect, sql: str, reads: tuple[str, ...]) -> None:
    assert guard(sql, policy(dialect)).tables == reads


def test_the_tenant_filter_wraps_every_reference_with_its_alias() -> None:
    guarded = guard(
        "SELECT o.id FROM orders o JOIN customers ON customers.id = o.customer_id "
        "WHERE o.id IN (SELECT id FROM orders) OR 1 = 1",
        policy(POSTGRES, scoped=True),
    )
    assert guarded.placeholders == 3
    text, params = guarded.bind("numeric_dollar", "t1")
    assert params == ("t1",)
    assert text == (
        'SELECT "o"."id" FROM (SELECT * FROM "public"."orders" WHERE "tenant_id" = $1) AS "o" '
        'JOIN (SELECT * FROM "public"."customers" WHERE "tenant_id" = $1) AS "customers" '
        'ON "customers"."id" = "o"."customer_id" WHERE "o"."id" IN '
        '(SELECT "id" FROM (SELECT * FROM "public"."orders" WHERE "tenant_id" = $1) AS "orders") OR 1 = 1 LIMIT 50'
    )
    assert guarded.bind("qmark", "t1")[1] == ("t1", "t1", "t1")
    assert guarded.bind("pyformat", "t1") == (text.replace("$1", "%(agora_tenant)s"), {"agora_tenant": "t1"})
    percent = guard("SELECT id FROM orders WHERE status LIKE 'p%'", policy(MYSQL, scoped=True))
    assert percent.bind("format", "t1")[0].endswith(
        "WHERE `tenant_id` = %s) AS `orders` WHERE `status` LIKE 'p%%' LIMIT 50"
    )
    assert percent.shown("format").endswith("LIKE 'p%' LIMIT 50")


def test_the_final_check_refuses_sql_that_names_what_was_not_allowed() -> None:
    scoped = policy(POSTGRES, scoped=True)
    with pytest.raises(tools.SqlRefusedError, match=r"could not be rewritten safely \(public\.secret\)"):
        _verify('SELECT * FROM "public"."secret"', scoped, "agora_tenant_x", 0)
    with pytest.raises(tools.SqlRefusedError, match="tenant filter of orders"):
        _verify('SELECT * FROM "public"."orders" AS "orders" WHERE "tenant_id" = agora_tenant_x OR 1 = 1', scoped,
                "agora_tenant_x", 1)  # fmt: skip
    with pytest.raises(tools.SqlRefusedError, match=r"could not be rewritten safely \(orders\)"):
        _verify("SELECT * FROM orders", policy(POSTGRES), "agora_tenant_x", 0)


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        (Decimal("12.30"), 12.3),
        (Decimal("5"), 5),
        (Decimal("12345678901234567890.123456789"), "12345678901234567890.123456789"),
        (Decimal("NaN"), "NaN"),
        (float("inf"), "inf"),
        (dt.date(2024, 3, 5), "2024-03-05"),
        (dt.datetime(2024, 3, 5, 7, 8, 9), "2024-03-05T07:08:09"),
        (dt.timedelta(hours=2), "2:00:00"),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        (b"\x00\xff", "0x00ff"),
        ([1, "a", None], [1, "a", None]),
        ({"k": Decimal("1.5")}, {"k": "1.5"}),
        (True, True),
    ],
)
def test_cells_become_json(value: object, cell: object) -> None:
    assert json_cell(value, 100) == (cell, False)


def test_long_cells_are_cut() -> None:
    assert json_cell("x" * 30, 10) == ("x" * 9 + "…", True)
    assert json_cell(b"\x01" * 30, 10) == ("0x0101010…", True)
    assert json_cell(list(range(100)), 10) == ("[0, 1, 2,…", True)
