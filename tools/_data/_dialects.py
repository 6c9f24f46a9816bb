"""What the data tool knows of each SQL dialect: names, catalogs, dangerous functions.

One ``SqlDialect`` per engine family the data tool runs on (PostgreSQL, SQLite, MySQL/MariaDB).
Its rules decide three things the guard cannot read from the SQL alone:

- **How a name is folded.** ``lookup_key`` is the key an allow-list entry and a reference of the
  model's are compared by. It may be looser than the database (the guard rewrites every allowed
  reference to the table's exact, quoted name, so a looser match can only ever reach an allowed
  table). ``cte_key`` decides when an unqualified name refers to a ``WITH`` query instead of a
  table; it must never be looser than the database, or a real table could pass as a CTE.
- **What is a system catalog**: schemas and name prefixes refused even when listed.
- **Which functions are refused**: a deny-list of names and prefixes (sleeping, reading server
  files, large objects, other connections, settings, locks, sequences, SQL-text evaluators), and
  an allow-list of the table functions that may stand in ``FROM``.

The deny-lists of all dialects apply whatever the engine: a name that means nothing in one
dialect may be an application's own function there, and refusing it costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DialectName = Literal["postgres", "sqlite", "mysql"]

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_lower(name: str) -> str:
    """``name`` with ASCII letters lowered only, as PostgreSQL and SQLite fold identifiers."""
    return name.translate(_ASCII_LOWER)


# -- functions --------------------------------------------------------------------------------------

_POSTGRES_DENIED = frozenset(
    {
        "current_setting", "set_config", "nextval", "setval", "currval", "lastval", "version",
        "inet_server_addr", "inet_server_port", "inet_client_addr", "inet_client_port",
        "ts_stat", "ts_rewrite", "crosstab", "crosstab2", "crosstab3", "crosstab4", "connectby",
        "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema", "cursor_to_xml",
        "cursor_to_xmlschema", "table_to_xml", "table_to_xmlschema", "table_to_xml_and_xmlschema",
        "schema_to_xml", "schema_to_xmlschema", "schema_to_xml_and_xmlschema", "database_to_xml",
        "database_to_xmlschema", "database_to_xml_and_xmlschema", "pgrowlocks", "pgstattuple",
        "has_table_privilege", "has_column_privilege", "has_database_privilege",
        # contrib (shipped with the server): pageinspect reads the raw pages of any table,
        # pgstattuple measures any table, xml2's xpath_table runs SQL given as text.
        "get_raw_page", "page_header", "page_checksum", "tuple_data_split", "fsm_page_contents",
        "hash_page_type", "hash_page_stats", "hash_page_items", "hash_bitmap_info", "hash_metapage_info",
        "pgstatindex", "pgstatginindex", "pgstathashindex", "pgstattuple_approx", "verify_heapam",
        "xpath_table",
    }
)  # fmt: skip
"""PostgreSQL functions refused by name: settings, sequences (writes), server identity, every
function that runs SQL given as text (``query_to_xml('select * from secret', ...)``, ``ts_stat``,
``crosstab``, ``xpath_table``) and would read around the allow-list, and the contrib functions
that read any table's pages whatever the allow-list says."""

_POSTGRES_DENIED_PREFIXES = (
    "pg_", "lo_", "dblink", "postgres_fdw", "txid_", "xid_", "heap_", "bt_", "brin_", "gin_", "gist_",
)  # fmt: skip
"""Every ``pg_*`` function (sleeping, files, backends, advisory locks, WAL, replication, stats
resets...), large objects, other connections and transaction ids; and the page, index and repair
functions of contrib and core (pageinspect's ``heap_page_items``, ``bt_page_items``...,
pg_surgery's ``heap_force_kill``, which destroys rows of any table in place, past ``READ ONLY``
and the rollback, amcheck's ``bt_index_check``, ``brin_summarize_range``, ``gin_clean_pending_list``,
which write indexes in a read-only transaction)."""

_MYSQL_DENIED = frozenset(
    {
        "sleep", "benchmark", "load_file", "get_lock", "release_lock", "release_all_locks",
        "is_free_lock", "is_used_lock", "master_pos_wait", "source_pos_wait", "master_gtid_wait",
        "wait_for_executed_gtid_set", "wait_until_sql_thread_after_gtids", "last_insert_id",
        "nextval", "setval", "lastval", "sys_exec", "sys_eval", "version", "current_version",
    }
)  # fmt: skip
"""MySQL and MariaDB functions refused: sleeping and busy loops, server files, named locks,
replication waits, session and sequence writes, and the usual shell-out UDFs."""

_SQLITE_DENIED = frozenset(
    {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "sqlite_compileoption_get"}
)
"""SQLite functions refused: loading extensions and the CLI's file functions."""

_SAFE_TABLE_FUNCTIONS = frozenset(
    {
        "generate_series", "exploding_generate_series", "unnest", "generate_subscripts",
        "json_each", "json_each_text", "jsonb_each", "jsonb_each_text", "json_array_elements",
        "json_array_elements_text", "jsonb_array_elements", "jsonb_array_elements_text",
        "json_to_record", "json_to_recordset", "jsonb_to_record", "jsonb_to_recordset",
        "jsonb_path_query", "regexp_split_to_table", "regexp_matches", "string_to_table",
        "json_tree", "json_table", "jsontable", "xmltable",
    }
)  # fmt: skip
"""Table functions that may stand in ``FROM`` (they compute rows from their arguments only);
any other function there is refused (``dblink(...)``, ``pragma_table_info(...)``)."""


@dataclass(frozen=True, kw_only=True)
class SqlDialect:
    """The rules of one SQL dialect (see the module docstring)."""

    name: DialectName
    """The sqlglot dialect the model's SQL is parsed in."""
    label: str
    """How the tool's description names it."""
    system_schemas: frozenset[str]
    """Schemas (lowered) that are system catalogs."""
    system_schema_prefixes: tuple[str, ...] = ()
    system_table_prefixes: tuple[str, ...] = ()
    """Table names (lowered) starting with one of these are system catalogs, in any schema."""
    self_reference_is_cte: bool = False
    """Whether a non-recursive CTE that names itself refers to itself (SQLite) rather than to a
    table of that name (PostgreSQL, MySQL)."""

    def lookup_key(self, name: str, quoted: bool) -> str:
        """The key a table or schema name is looked up by (may be looser than the database)."""
        if self.name == "postgres" and quoted:
            return name
        return name.lower()

    def cte_key(self, name: str, quoted: bool) -> str:
        """The key a CTE name and a reference are matched by: never looser than the database."""
        if self.name == "postgres":
            return name if quoted else ascii_lower(name)
        if self.name == "sqlite":
            return ascii_lower(name)  # SQLite compares names ASCII-case-insensitively, quoted or not
        return name

    def is_system(self, schema: str | None, table: str) -> bool:
        """Whether ``schema.table`` (either part as written) is a system catalog."""
        lowered_schema = schema.lower() if schema is not None else None
        lowered = table.lower()
        if lowered_schema is not None and (
            lowered_schema in self.system_schemas or lowered_schema.startswith(self.system_schema_prefixes or ("\0",))
        ):
            return True
        return bool(self.system_table_prefixes) and lowered.startswith(self.system_table_prefixes)


POSTGRES = SqlDialect(
    name="postgres",
    label="PostgreSQL",
    system_schemas=frozenset({"pg_catalog", "information_schema", "pg_toast"}),
    system_schema_prefixes=("pg_",),
    # Unqualified pg_* names resolve in pg_catalog first, whatever the search path says.
    system_table_prefixes=("pg_",),
)
SQLITE = SqlDialect(
    name="sqlite",
    label="SQLite",
    system_schemas=frozenset(),
    # sqlite_master / sqlite_schema / sqlite_sequence / sqlite_stat*, and the pragma_* tables.
    system_table_prefixes=("sqlite_", "pragma_"),
    self_reference_is_cte=True,
)
MYSQL = SqlDialect(
    name="mysql",
    label="MySQL/MariaDB",
    system_schemas=frozenset({"mysql", "information_schema", "performance_schema", "sys"}),
)

DENIED_FUNCTIONS = _POSTGRES_DENIED | _MYSQL_DENIED | _SQLITE_DENIED
"""Every dialect's refused function names, lowered."""
DENIED_FUNCTION_PREFIXES = _POSTGRES_DENIED_PREFIXES
SAFE_TABLE_FUNCTIONS = _SAFE_TABLE_FUNCTIONS


PARAM_MARKS = {
    "qmark": "?",
    "numeric": ":1",
    "named": ":agora_tenant",
    "format": "%s",
    "pyformat": "%(agora_tenant)s",
    "numeric_dollar": "$1",
}
"""How each DB-API ``paramstyle`` writes the tenant parameter."""


def is_denied_function(name: str, extra: frozenset[str] = frozenset()) -> bool:
    """Whether a function of this (lowered) name is refused."""
    return name in DENIED_FUNCTIONS or name in extra or name.startswith(DENIED_FUNCTION_PREFIXES)


def dialect_for(engine_dialect: str) -> SqlDialect:
    """The rules for an SQLAlchemy dialect name (``postgresql``, ``sqlite``, ``mysql``/``mariadb``).

    Raises:
        ValueError: Another database (the tool knows these three only).
    """
    if engine_dialect == "postgresql":
        return POSTGRES
    if engine_dialect == "sqlite":
        return SQLITE
    if engine_dialect in ("mysql", "mariadb"):
        return MYSQL
    raise ValueError(f"data_tool runs on PostgreSQL, SQLite, MySQL or MariaDB, not {engine_dialect!r}")
