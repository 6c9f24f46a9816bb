"""The hostile SQL the data tool faces, and what each must come to, per database.

``REFUSED`` cases fail the call with the reason given (a regular expression over the message the
model reads). ``CONTAINED`` cases run, but see only the caller's own rows (tenant ``t1``) and none
of the secret ones: the model's own predicates cannot widen the tenant filter, and a comment can
carry nothing into the SQL that runs. ``{schema}`` is the database's default schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

KINDS = ("postgresql", "sqlite", "mariadb")

ONE = "send exactly one statement"
ONLY_SELECT = "only a SELECT query is accepted"
WRITES = "only reads are allowed, and this query holds"
LOCKS = "locking clauses"
INTO = r"SELECT \.\.\. INTO is not allowed"
PARAMS = "parameters and variables"
NOT_PARSED = "could not be parsed as"
TIMEOUT = "ran past its time limit"


def denied(name: str) -> str:
    return rf"the function {name}\(\) is not allowed"


def not_listed(label: str) -> str:
    return rf"table {label} is not one you may query \(you may query: big, customers, order_totals, orders, products\)"


def system(label: str) -> str:
    return rf"{label} is a system catalog"


@dataclass(frozen=True, kw_only=True)
class Case:
    """One hostile query and its outcome on each database."""

    id: str
    sql: str
    reason: str | None
    """What the refusal says (``None``: the query runs, contained)."""
    code: str = "sql_refused"
    per_kind: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """``kind -> (code, reason)`` where a database answers differently."""

    def expected(self, kind: str) -> tuple[str, str | None]:
        if kind in self.per_kind:
            return self.per_kind[kind]
        return self.code, self.reason


def refused(id: str, sql: str, reason: str, **per_kind: tuple[str, str]) -> Case:
    return Case(id=id, sql=sql, reason=reason, per_kind=per_kind)


def contained(id: str, sql: str) -> Case:
    return Case(id=id, sql=sql, reason=None)


CASES = [
    # -- more than one statement -------------------------------------------------------------------
    refused("two_statements", "SELECT 1; SELECT 2", ONE),
    refused("select_then_drop", "SELECT * FROM orders; DROP TABLE canary", ONE),
    refused("select_then_delete_commented", "SELECT 1; DELETE FROM canary --", ONE),
    refused("statement_after_line_comment", "SELECT 1 --\n; DROP TABLE canary", ONE),
    # -- not a SELECT ------------------------------------------------------------------------------
    refused("drop", "DROP TABLE canary", rf"{ONLY_SELECT}, not DROP"),
    refused("insert", "INSERT INTO canary VALUES (99, 'x')", rf"{ONLY_SELECT}, not INSERT"),
    refused("update", "UPDATE canary SET value = 'x'", rf"{ONLY_SELECT}, not UPDATE"),
    refused("delete_behind_comment", "/* SELECT */ DELETE FROM canary", rf"{ONLY_SELECT}, not DELETE"),
    refused("explain_analyze_delete", "EXPLAIN ANALYZE DELETE FROM canary", rf"{ONLY_SELECT}, not EXPLAIN"),
    refused("copy_to_file", "COPY canary TO '/tmp/agora-canary'", rf"{ONLY_SELECT}, not COPY"),
    refused("set_timeout_off", "SET statement_timeout = 0", rf"{ONLY_SELECT}, not SET"),
    refused("pragma", "PRAGMA writable_schema = 1", rf"{ONLY_SELECT}, not PRAGMA"),
    refused("attach", "ATTACH DATABASE '/tmp/agora-evil.db' AS evil", rf"{ONLY_SELECT}, not ATTACH"),
    refused("split_keyword_comment", "SEL/**/ECT * FROM orders", rf"{ONLY_SELECT}, not SEL"),
    refused("values", "VALUES (1)", rf"{ONLY_SELECT}, not VALUES"),
    # -- writes inside a SELECT --------------------------------------------------------------------
    refused("cte_delete_returning", "WITH d AS (DELETE FROM canary RETURNING *) SELECT * FROM d", f"{WRITES} DELETE"),
    refused(
        "cte_update_returning",
        "WITH u AS (UPDATE canary SET value = 'x' RETURNING id) SELECT * FROM u",
        f"{WRITES} UPDATE",
    ),
    refused(
        "cte_insert_returning",
        "WITH i AS (INSERT INTO canary VALUES (9, 'x') RETURNING id) SELECT * FROM i",
        f"{WRITES} INSERT",
    ),
    refused("select_into_table", "SELECT * INTO stolen FROM orders", INTO),
    refused("select_into_variable", "SELECT id INTO @v FROM orders", INTO),
    refused("select_into_outfile", "SELECT * FROM orders INTO OUTFILE '/tmp/agora-out'", NOT_PARSED),
    # -- locking -----------------------------------------------------------------------------------
    refused("for_update", "SELECT * FROM orders FOR UPDATE", LOCKS),
    refused("for_share", "SELECT * FROM orders FOR SHARE", LOCKS),
    refused("for_no_key_update_skip_locked", "SELECT * FROM orders FOR NO KEY UPDATE SKIP LOCKED", LOCKS),
    refused("lock_in_share_mode", "SELECT * FROM orders LOCK IN SHARE MODE", LOCKS),
    refused("for_update_in_subquery", "SELECT * FROM orders WHERE id IN (SELECT id FROM orders FOR UPDATE)", LOCKS),
    # -- denied functions --------------------------------------------------------------------------
    refused("pg_sleep", "SELECT pg_sleep(5)", denied("pg_sleep")),
    refused(
        "pg_sleep_nested",
        "SELECT * FROM orders WHERE id = (SELECT 1 FROM (SELECT pg_sleep(5)) x)",
        denied("pg_sleep"),
    ),
    # MariaDB reads "PG_SLEEP" as a string, and PostgreSQL refuses backquotes.
    refused("pg_sleep_upper_quoted", 'SELECT "PG_SLEEP"(1)', denied("pg_sleep"), mariadb=("sql_refused", NOT_PARSED)),
    refused("sleep_backquoted", "SELECT `sleep`(1)", denied("sleep"), postgresql=("sql_refused", NOT_PARSED)),
    refused("sleep", "SELECT sleep(5)", denied("sleep")),
    refused("benchmark", "SELECT benchmark(100000000, md5('x'))", denied("benchmark")),
    refused("pg_read_file", "SELECT pg_read_file('/etc/passwd')", denied("pg_read_file")),
    refused("load_extension", "SELECT load_extension('/tmp/evil.so')", denied("load_extension")),
    refused("load_file", "SELECT load_file('/etc/passwd')", denied("load_file")),
    refused("lo_import", "SELECT lo_import('/etc/passwd')", denied("lo_import")),
    refused("dblink_in_from", "SELECT * FROM dblink('dbname=x', 'DELETE FROM canary') AS t(a int)", denied("dblink")),
    refused("set_config", "SELECT set_config('statement_timeout', '0', false)", denied("set_config")),
    refused("query_to_xml", "SELECT query_to_xml('SELECT * FROM secret', true, false, '')", denied("query_to_xml")),
    refused("nextval", "SELECT nextval('orders_seq')", denied("nextval")),
    refused("get_lock", "SELECT get_lock('x', 10)", denied("get_lock")),
    refused("schema_qualified_function", "SELECT pg_catalog.lower('x')", "schema-qualified function calls"),
    refused(
        "table_function_in_from",
        "SELECT * FROM pragma_table_info('secret')",
        r"pragma_table_info\(\) may not be used as a table in FROM",
    ),
    # -- tables outside the allow-list -------------------------------------------------------------
    refused("unlisted_table", "SELECT * FROM secret", not_listed("secret")),
    refused("schema_prefix", "SELECT * FROM {schema}.secret", not_listed(r"\w+\.secret")),
    refused("other_schema_same_name", "SELECT * FROM private.orders", not_listed(r"private\.orders")),
    refused("three_part_name", "SELECT * FROM x.public.orders", "three-part names are not allowed"),
    refused("double_quoted", 'SELECT * FROM "secret"', not_listed("secret")),
    refused(
        "backquoted",
        "SELECT * FROM `secret`",
        not_listed("secret"),
        postgresql=("sql_refused", NOT_PARSED),
    ),
    refused("mixed_case", "SELECT * FROM SeCrEt", not_listed("SeCrEt")),
    refused("hidden_by_comment", "SELECT * FROM/**/secret", not_listed("secret")),
    refused("in_subquery", "SELECT * FROM orders WHERE customer_id IN (SELECT id FROM secret)", not_listed("secret")),
    refused("derived_table", "SELECT * FROM (SELECT * FROM secret) s", not_listed("secret")),
    refused("scalar_subquery", "SELECT (SELECT token FROM secret LIMIT 1) FROM orders", not_listed("secret")),
    refused("join", "SELECT * FROM orders o JOIN secret s ON s.id = o.id", not_listed("secret")),
    refused("union", "SELECT id, status FROM orders UNION SELECT id, token FROM secret", not_listed("secret")),
    refused("behind_a_cte", "WITH o AS (SELECT * FROM secret) SELECT * FROM o", not_listed("secret")),
    refused(
        "cte_name_out_of_scope",
        "SELECT * FROM secret WHERE EXISTS (WITH secret AS (SELECT 1) SELECT 1)",
        not_listed("secret"),
    ),
    refused(
        "cte_naming_itself",
        "WITH secret AS (SELECT * FROM secret) SELECT * FROM secret",
        not_listed("secret"),
        sqlite=("sql_error", "circular reference: secret"),  # SQLite reads the name as the CTE itself
    ),
    refused("unlisted_view", "SELECT * FROM secret_view", not_listed("secret_view")),
    refused("table_statement", "TABLE secret", not_listed("secret"), sqlite=("sql_refused", ONLY_SELECT)),
    refused(
        "type_carrying_sql",
        'SELECT CAST(id AS "a) FROM secret --") FROM orders',
        "is not a type the query",
        mariadb=("sql_refused", NOT_PARSED),
    ),
    # -- system catalogs ---------------------------------------------------------------------------
    refused(
        "pg_catalog",
        "SELECT * FROM pg_catalog.pg_class",
        system(r"pg_catalog\.pg_class"),
        sqlite=("sql_refused", not_listed(r"pg_catalog\.pg_class")),
        mariadb=("sql_refused", not_listed(r"pg_catalog\.pg_class")),
    ),
    refused(
        "pg_views_unqualified",
        "SELECT * FROM pg_views",
        system("pg_views"),
        sqlite=("sql_refused", not_listed("pg_views")),
        mariadb=("sql_refused", not_listed("pg_views")),
    ),
    refused(
        "information_schema",
        "SELECT * FROM information_schema.tables",
        system(r"information_schema\.tables"),
        sqlite=("sql_refused", not_listed(r"information_schema\.tables")),
    ),
    refused(
        "sqlite_master",
        "SELECT * FROM sqlite_master",
        system("sqlite_master"),
        postgresql=("sql_refused", not_listed("sqlite_master")),
        mariadb=("sql_refused", not_listed("sqlite_master")),
    ),
    refused(
        "mysql_user",
        "SELECT * FROM mysql.user",
        system(r"mysql\.user"),
        postgresql=("sql_refused", not_listed(r"mysql\.user")),
        sqlite=("sql_refused", not_listed(r"mysql\.user")),
    ),
    # -- parameters, variables, odd input -----------------------------------------------------------
    refused("placeholder", "SELECT * FROM orders WHERE id = ?", PARAMS),
    refused("named_placeholder", "SELECT * FROM orders WHERE id = :id", PARAMS),
    # PostgreSQL reads @@ as an operator, and fails on the column it then names.
    refused("server_variable", "SELECT @@datadir", PARAMS, postgresql=("sql_error", "could not run the query")),
    refused("variable_assignment", "SELECT @a := 1", PARAMS),
    refused("unparseable", "SELECT * FROM orders WHERE", NOT_PARSED),
    refused("only_a_comment", "-- nothing", "the SQL is empty"),
    refused("nested_too_deep", "SELECT " + "(" * 3000 + "1" + ")" * 3000, "nested too deeply"),
    # -- values made to a size in one step, which no time limit stops (memory bombs) ----------------
    refused(
        "randomblob_bomb",
        "SELECT randomblob(1000000000) AS b, randomblob(1000000000) AS c FROM products",
        r"randomblob\(\) may make at most 10,000 characters, not 1,000,000,000",
    ),
    refused("zeroblob_of_a_column", "SELECT zeroblob(id * 1000000000) FROM products", r"zeroblob\(\) takes its length"),
    refused(
        "repeat_bomb",
        "SELECT repeat(name, 500000000) FROM products",
        r"repeat\(\) may make at most 10,000 characters",
        sqlite=("sql_refused", r"repeat\(\) may make at most 10,000 characters"),
    ),
    refused("lpad_bomb", "SELECT lpad(name, 900000000, 'x') FROM products", r"lpad\(\) may make at most 10,000"),
    refused(
        "repeat_of_repeat",
        "SELECT repeat(repeat(name, 10000), 10000) FROM products",
        r"repeat\(\) may not make a value of another sized value \(repeat\(\)\)",
    ),
    refused("printf_star_width", "SELECT printf('%.*c', 900000000, 'x') FROM products", r"printf\(\) widths"),
    refused("printf_wide", "SELECT printf('%900000000d', 1) FROM products", r"printf\(\) widths"),
    # -- past the time limit (pg_sleep is denied: a slow query of allowed tables instead) ------------
    Case(
        id="cross_join_past_timeout",
        sql="SELECT count(*) FROM big a, big b, big c, big d",
        reason=TIMEOUT,
        code="sql_timeout",
    ),
    # -- contained: runs, sees the caller's rows only ----------------------------------------------
    contained("tenant_or_true", "SELECT * FROM orders WHERE tenant_id = 't1' OR 1=1"),
    contained(
        "tenant_other_unioned",
        "SELECT id, tenant_id FROM orders UNION SELECT id, tenant_id FROM orders WHERE tenant_id = 't2'",
    ),  # noqa: E501
    contained("tenant_negated", "SELECT * FROM orders o WHERE o.tenant_id <> 't1' OR o.tenant_id IS NOT NULL"),
    contained("tenant_widened_in_subquery", "SELECT * FROM (SELECT * FROM orders WHERE tenant_id = 't2' OR 1=1) x"),
    contained("tenant_widened_in_cte", "WITH mine AS (SELECT * FROM orders WHERE 1=1) SELECT * FROM mine"),
    contained("tenant_list", "SELECT c.name, c.email FROM customers c WHERE c.tenant_id IN ('t1', 't2')"),
    contained("tenant_view", "SELECT * FROM order_totals WHERE tenant_id = 't2' OR tenant_id = 't1'"),
    contained(
        "tenant_join_other",
        "SELECT o.id, c.name FROM orders o JOIN customers c ON c.tenant_id <> o.tenant_id OR c.id = o.customer_id",
    ),  # noqa: E501
    contained("comment_after_filter", "SELECT * FROM orders -- AND tenant_id = 't1'"),
    contained("executable_comment", "SELECT id /*! , (SELECT token FROM secret LIMIT 1) */ FROM orders"),
]

FORBIDDEN = ("t2", "Cy", "cy@t2.example", "other tenant", "other tenant again", "s3cr3t", "99.99")
"""Values the caller (tenant t1, no access to secret) must never see."""
