"""The allow-list ``{role: {group: [tables]}}``, and the schema of its tables as the database has it.

The allow-list is checked when the tool is built (developer mistakes fail there, by name). The
tables are reflected once, on first use, through SQLAlchemy's inspector: that finds each table
(or view) under its exact stored name, its columns and types for the description, and the
tenant column of each scoped table. A table that is missing, or scoped without the tenant
column, is a configuration error named in the message.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError

from .._errors import UserError
from ._dialects import SqlDialect
from ._guard import AllowedTable

_PLAIN = {"postgres": re.compile(r"[a-z_][a-z0-9_$]*"), "sqlite": re.compile(r"[A-Za-z_][A-Za-z0-9_]*")}
_PLAIN_DEFAULT = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One table of the allow-list, as the application wrote it."""

    text: str
    schema: exp.Identifier | None
    name: exp.Identifier

    def key(self, dialect: SqlDialect) -> tuple[str | None, str]:
        """Its lookup keys; ``None`` for the default schema."""
        schema = dialect.lookup_key(self.schema.name, bool(self.schema.quoted)) if self.schema else None
        return schema, dialect.lookup_key(self.name.name, bool(self.name.quoted))


def parse_entry(text: object, dialect: SqlDialect, where: str) -> Entry:
    """An allow-list entry (``orders``, ``sales.orders``, ``"Orders"``) as a table name.

    Raises:
        UserError: Not a table name, three parts, or a system catalog.
    """
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"{where}: a table must be a non-empty str, not {text!r}")
    try:
        table = exp.maybe_parse(text, dialect=dialect.name, into=exp.Table)
    except SqlglotError:
        table = None
    parts = ("this", "db")
    if (
        not isinstance(table, exp.Table)
        or not isinstance(table.this, exp.Identifier)
        or any(value for key, value in table.args.items() if key not in parts)
        or (table.args.get("db") is not None and not isinstance(table.args["db"], exp.Identifier))
    ):
        raise UserError(f"{where}: {text!r} is not a table name (write table or schema.table)")
    db = table.args.get("db")
    if dialect.is_system(db.name if db is not None else None, table.name):
        raise UserError(f"{where}: {text!r} is a system catalog; the data tool never opens one")
    return Entry(text=text, schema=db, name=table.this)


@dataclass(frozen=True, kw_only=True)
class Access:
    """The allow-list, checked: per role, per group, the entries."""

    roles: dict[str, dict[str, list[Entry]]]
    entries: dict[str, Entry]
    """Every entry by its text."""

    def groups_for(self, roles: Collection[str]) -> dict[str, list[Entry]]:
        """The groups (and their entries, without repeats) the given roles open, in listed order."""
        groups: dict[str, list[Entry]] = {}
        for role, by_group in self.roles.items():
            if role not in roles:
                continue
            for group, entries in by_group.items():
                listed = groups.setdefault(group, [])
                listed.extend(entry for entry in entries if entry not in listed)
        return groups


def check_access(access: object, dialect: SqlDialect) -> Access:
    """Check ``{role: {group: [tables]}}`` and parse its tables.

    Raises:
        UserError: Not that shape, empty, or naming something that is not a table.
    """
    where = "data_tool(access=...)"
    if not isinstance(access, Mapping) or not access:
        raise UserError(f"{where}: a non-empty {{role: {{group: [tables]}}}} mapping is required (no allow-all)")
    roles: dict[str, dict[str, list[Entry]]] = {}
    entries: dict[str, Entry] = {}
    for role, groups in access.items():
        if not isinstance(role, str) or not role:
            raise UserError(f"{where}: roles must be non-empty str, not {role!r}")
        if not isinstance(groups, Mapping) or not groups:
            raise UserError(f"{where}: role {role!r} needs a non-empty {{group: [tables]}} mapping")
        roles[role] = {}
        for group, tables in groups.items():
            if not isinstance(group, str) or not group:
                raise UserError(f"{where}: groups of role {role!r} must be non-empty str, not {group!r}")
            if isinstance(tables, str) or not isinstance(tables, Sequence) or not tables:
                raise UserError(f"{where}: group {group!r} of role {role!r} needs a non-empty list of tables")
            parsed = [entries.get(text) or parse_entry(text, dialect, where) for text in tables]
            for entry in parsed:
                entries.setdefault(entry.text, entry)
            roles[role][group] = parsed
    return Access(roles=roles, entries=entries)


@dataclass(frozen=True, kw_only=True)
class Column:
    """A column of an allowed table, for the description."""

    name: str
    type: str


@dataclass(frozen=True, kw_only=True)
class Reflected:
    """An allowed table as the database has it."""

    table: AllowedTable
    columns: list[Column]
    tenant_type: type | None = None
    """The Python type of its tenant column (``int`` for an integer column), when scoped."""


@dataclass(kw_only=True)
class Schema:
    """Every allowed table, reflected once."""

    default_schema: str
    tables: dict[str, Reflected] = field(default_factory=dict)
    """By the allow-list entry's text."""


def label_of(schema: str, name: str, default_schema: str, dialect: SqlDialect) -> str:
    """How the model should write a table: bare in the default schema, ``schema.table`` elsewhere."""
    plain = _PLAIN.get(dialect.name, _PLAIN_DEFAULT)
    quote = '"' if dialect.name != "mysql" else "`"

    def part(text: str) -> str:
        return text if plain.fullmatch(text) else quote + text.replace(quote, quote * 2) + quote

    same = dialect.lookup_key(schema, True) == dialect.lookup_key(default_schema, True)
    return part(name) if same else f"{part(schema)}.{part(name)}"


def reflect(
    sync_conn: Any,
    access: Access,
    dialect: SqlDialect,
    *,
    tenant_column: str | None,
    shared: Collection[str],
) -> Schema:
    """Reflect every table of the allow-list (runs in SQLAlchemy's ``run_sync``).

    Raises:
        UserError: A table is missing, or a scoped table lacks the tenant column.
    """
    from sqlalchemy import inspect

    inspector = inspect(sync_conn)
    default = inspector.default_schema_name
    schema = Schema(default_schema=default or "")
    names_by_schema: dict[str, list[str]] = {}
    for entry in access.entries.values():
        stored_schema = _stored_schema(inspector, entry, default, dialect)
        if stored_schema not in names_by_schema:
            names_by_schema[stored_schema] = list(inspector.get_table_names(schema=stored_schema)) + list(
                inspector.get_view_names(schema=stored_schema)
            )
        stored = _match(names_by_schema[stored_schema], entry.name, dialect)
        if stored is None:
            raise UserError(f"data_tool: table {entry.text!r} is not in schema {stored_schema!r} of the database")
        reflected_columns = inspector.get_columns(stored, schema=stored_schema)
        columns = [Column(name=str(c["name"]), type=_type_name(c["type"])) for c in reflected_columns]
        tenant, tenant_type = None, None
        if tenant_column is not None and entry.text not in shared:
            found = [
                c
                for c in reflected_columns
                if dialect.lookup_key(str(c["name"]), True) == dialect.lookup_key(tenant_column, True)
            ]
            if not found:
                raise UserError(
                    f"data_tool: table {entry.text!r} has no column {tenant_column!r}; "
                    "list it in shared_tables if every tenant may read all of it"
                )
            tenant, tenant_type = str(found[0]["name"]), _python_type(found[0]["type"])
        table = AllowedTable(
            schema=stored_schema,
            name=stored,
            label=label_of(stored_schema, stored, schema.default_schema, dialect),
            tenant_column=tenant,
        )
        schema.tables[entry.text] = Reflected(table=table, columns=columns, tenant_type=tenant_type)
    return schema


def _stored_schema(inspector: Any, entry: Entry, default: str | None, dialect: SqlDialect) -> str:
    if entry.schema is None:
        if not default:
            raise UserError(f"data_tool: {entry.text!r} names no schema and the connection has no default one")
        return str(default)
    stored = _match(list(inspector.get_schema_names()), entry.schema, dialect)
    if stored is None:
        raise UserError(f"data_tool: the schema of {entry.text!r} is not in the database")
    return stored


def _match(names: list[str], wanted: exp.Identifier, dialect: SqlDialect) -> str | None:
    key = dialect.lookup_key(wanted.name, bool(wanted.quoted))
    found = [name for name in names if dialect.lookup_key(name, True) == key]
    exact = [name for name in found if name == wanted.name]
    chosen = exact or sorted(found)
    return chosen[0] if chosen else None


def _type_name(sql_type: Any) -> str:
    if type(sql_type).__name__ == "NullType":  # SQLite views and expressions: no declared type
        return ""
    try:
        return str(sql_type)
    except Exception:  # a type the dialect cannot compile still has a name
        return type(sql_type).__name__


def _python_type(sql_type: Any) -> type | None:
    try:
        python_type = sql_type.python_type
    except (NotImplementedError, AttributeError):
        return None
    return python_type if isinstance(python_type, type) else None
