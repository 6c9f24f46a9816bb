"""``data_tool(...)``: the governed read-only SQL tool, built on ``define_tool`` like any other.

A call runs, in order: the roles of ``ctx.actor`` pick the groups of the allow-list; the guard
checks and rewrites the model's SQL (``_guard``); the tenant filter is bound from
``ctx.actor.tenant_ref`` (never from the model's text); the runner executes it read-only under a
time limit (``_runners``); its rows are taken as they come, while they fit the byte budget
(``_results``), and the rest are never read. A refusal is a ``SqlRefusedError`` the model reads,
logged as one line, and nothing reached the database.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from .._context import ToolContext
from .._errors import SqlRefusedError, ToolFailed, UserError
from .._presentation import ElsewhereView, ToolPresentation
from .._tool import DescribeScope, Tool, ToolDescription, _check_presentation, define_tool
from .._ui import UiComponent
from ._dialects import PARAM_MARKS, SqlDialect, dialect_for, is_denied_function
from ._results import Rows, data_table, shape
from ._runners import Fetched, Reads, Runner, runner_for

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from ._catalog import Access, Entry, Schema
    from ._guard import AllowedTable, GuardPolicy

# ``_catalog`` and ``_guard`` import sqlglot (a third of a second): they are imported where a data
# tool is built or used, so that ``import tools`` does not pay for it.

__all__ = ["data_tool"]

logger = logging.getLogger("tools.data")

MAX_SQL_CHARS = 20_000
_GRACE = 2.0
"""Seconds past the database's own time limit before the call itself gives up."""
_REFLECT_TIMEOUT = 15.0
_OPTIONS = frozenset({"enabled", "is_enabled", "can_use", "ability"})
_TIMEOUT_CODES = {"57014"}  # PostgreSQL query_canceled (statement_timeout)
_MYSQL_TIMEOUT_CODES = {1969, 3024, 1317}  # max_statement_time, max_execution_time, interrupted
_WRITE_CODES = {"25006"}  # PostgreSQL read_only_sql_transaction
_MYSQL_WRITE_CODES = {1792}  # ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION


class SqlInput(BaseModel):
    """The data tool's one argument."""

    model_config = ConfigDict(extra="forbid")

    sql: str = Field(
        min_length=1,
        max_length=MAX_SQL_CHARS,
        description="One read-only SQL SELECT statement (WITH ... SELECT and UNION are fine).",
    )


DEFAULT_PRESENTATION = ToolPresentation(
    label="Data query", running="Querying the data", done="Queried the data", icon="chart", result=ElsewhereView()
)
"""The rows are drawn as a ``DataTable``; the tool line's details list the SQL that ran."""


@dataclass(kw_only=True)
class _DataTool:
    """One data tool's configuration, its reflected schema, and its hooks."""

    name: str
    engine: AsyncEngine
    dialect: SqlDialect
    access: Access
    runner: Runner
    paramstyle: str
    intro: str
    tenant_column: str | None
    shared: frozenset[str]
    max_rows: int
    max_bytes: int
    max_cell_chars: int
    timeout: float
    denied: frozenset[str]
    _schema: Schema | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _descriptions: dict[tuple[tuple[str, ...], ...], str] = field(default_factory=dict)

    # -- the schema ---------------------------------------------------------------------------------

    async def schema(self) -> Schema:
        """The allowed tables as the database has them, reflected on first use."""
        if self._schema is not None:
            return self._schema
        from ._catalog import reflect

        async with self._lock:
            if self._schema is None:
                async with asyncio.timeout(_REFLECT_TIMEOUT), self.engine.connect() as conn:
                    self._schema = await conn.run_sync(
                        reflect, self.access, self.dialect, tenant_column=self.tenant_column, shared=self.shared
                    )
        return self._schema

    def rules(self) -> str:
        """The part of the description every caller reads."""
        label = self.dialect.label
        if self.dialect.name == "mysql" and self._schema is not None:  # the server is known by now
            label = "MariaDB" if getattr(self.engine.dialect, "is_mariadb", False) else "MySQL"
        text = (
            f"Write {label} SQL: one SELECT statement (WITH ... SELECT and UNION are fine). "
            f"At most {self.max_rows} rows come back (a larger LIMIT is lowered), the query is stopped after "
            f"{self.timeout:g} s, and a result over {self.max_bytes:,} bytes is cut. Writes, SELECT ... INTO, "
            "locking clauses, parameters, system catalogs and tables not listed are refused."
        )
        if self.tenant_column is not None:
            text += (
                f" Rows are already limited to the caller's own (column {self.tenant_column}): "
                "there is no need to filter by it."
            )
        return text

    def description_for(self, schema: Schema, groups: Mapping[str, list[Entry]]) -> str:
        """The description one caller reads: the rules, then the tables of their groups with columns."""
        key = tuple((group, *(entry.text for entry in entries)) for group, entries in groups.items())
        known = self._descriptions.get(key)
        if known is not None:
            return known
        lines = [self.intro, "", self.rules(), "", "Tables you may query (columns and types):"]
        for group, entries in groups.items():
            lines.append(f"{group}:")
            for entry in entries:
                reflected = schema.tables[entry.text]
                columns = ", ".join(f"{c.name} {c.type}".strip() for c in reflected.columns)
                lines.append(f"- {reflected.table.label} ({columns})")
        text = "\n".join(lines)
        self._descriptions[key] = text
        return text

    def policy_for(self, schema: Schema, groups: Mapping[str, list[Entry]]) -> GuardPolicy:
        """What one caller's query is checked against."""
        from ._guard import GuardPolicy

        tables: dict[tuple[str, str], AllowedTable] = {}
        for entries in groups.values():
            for entry in entries:
                table = schema.tables[entry.text].table
                key = (self.dialect.lookup_key(table.schema, True), self.dialect.lookup_key(table.name, True))
                tables[key] = table
        return GuardPolicy(
            dialect=self.dialect,
            default_schema=schema.default_schema,
            tables=tables,
            max_rows=self.max_rows,
            denied_functions=self.denied,
        )

    # -- the hooks ----------------------------------------------------------------------------------

    async def describe(self, scope: DescribeScope) -> ToolDescription:
        """Offered, with those tables' schema, to a caller whose roles open a group.

        When the data is kept per tenant, only to a caller who belongs to one.
        """
        groups = self.access.groups_for(scope.actor.roles)
        if not groups:
            return ToolDescription(available=False)
        if self.tenant_column is not None and scope.actor.tenant_ref is None:
            # Every call of theirs would be refused: not offered at all (as without a group).
            return ToolDescription(available=False)
        try:
            schema = await self.schema()
        except Exception as exc:  # withheld this turn; the next turn reflects again
            logger.warning("data tool %s is withheld: its tables could not be read (%s: %s)", self.name,
                           type(exc).__name__, exc)  # fmt: skip
            return ToolDescription(available=False)
        return ToolDescription(description=self.description_for(schema, groups))

    async def execute(self, input: SqlInput, ctx: ToolContext) -> dict[str, Any]:
        """Guard, bind, run and shape one query (see the module docstring)."""
        from ._guard import guard

        try:
            schema = await self.schema()
        except UserError:
            raise
        except Exception as exc:
            raise _unavailable() from exc
        groups = self.access.groups_for(ctx.actor.roles)
        try:
            if not groups:
                raise SqlRefusedError("the caller may not query any table")
            if self.tenant_column is not None and ctx.actor.tenant_ref is None:
                raise SqlRefusedError("the data is kept per tenant, and this caller belongs to none")
            policy = self.policy_for(schema, groups)
            # In a thread: sqlglot parses, rewrites and parses again in pure Python, up to a few
            # hundred milliseconds for a long query (MAX_SQL_CHARS), which would stall the loop.
            guarded = await asyncio.to_thread(guard, input.sql, policy)
        except SqlRefusedError as exc:
            logger.info("data tool %s refused a query: %.300r", self.name, exc.reason)  # repr: one line
            raise
        value = self._tenant_value(schema, guarded.tables, ctx.actor.tenant_ref)
        sql, params = guarded.bind(self.paramstyle, value)
        rows = Rows(sql=guarded.shown(self.paramstyle), max_bytes=self.max_bytes, max_cell_chars=self.max_cell_chars)
        fetched = await self._run(sql, params, self._reads(policy), rows)
        return shape(rows, columns=fetched.columns, max_rows=self.max_rows, limited=guarded.limited)

    def present(self, output: Any, ctx: ToolContext) -> UiComponent | None:
        """The rows as a ``DataTable``."""
        return data_table(output) if isinstance(output, Mapping) else None

    # -- running ------------------------------------------------------------------------------------

    def _tenant_value(self, schema: Schema, labels: Collection[str], tenant: str | None) -> Any:
        scoped = [r for r in schema.tables.values() if r.table.tenant_column and r.table.label in labels]
        if tenant is None or not scoped:
            return tenant
        if any(r.tenant_type is int for r in scoped):
            try:
                return int(tenant)
            except ValueError:
                logger.info("data tool %s: a tenant reference that is not a number, for a numeric column", self.name)
                raise ToolFailed(
                    "The caller's tenant cannot be compared with the tenant column, which holds numbers.",
                    code="sql_error",
                ) from None
        return tenant

    def _reads(self, policy: GuardPolicy) -> Reads:
        denied = self.denied
        return Reads(
            tables=frozenset((t.schema.lower(), t.name.lower()) for t in policy.tables.values()),
            denied_function=lambda name: is_denied_function(name, denied),
        )

    async def _run(self, sql: str, params: Any, reads: Reads, rows: Rows) -> Fetched:
        scope = asyncio.timeout(self.timeout + _GRACE)
        try:
            async with scope:
                return await self.runner.run(self.engine, sql, params, self.timeout, reads, rows)
        except TimeoutError as exc:
            if scope.expired():
                raise self._timed_out() from None
            raise self._failure(exc) from exc
        except Exception as exc:
            failure = self._failure(exc)
            if failure is exc:
                raise  # not the database's: as it was (``raise exc from exc`` would make it its own cause)
            raise failure from exc

    def _timed_out(self) -> ToolFailed:
        logger.info("data tool %s stopped a query at its time limit of %g s", self.name, self.timeout)
        return ToolFailed(
            f"The query ran past its time limit of {self.timeout:g} s and was stopped. "
            "Filter, aggregate or join less to make it faster.",
            code="sql_timeout",
        )

    def _failure(self, exc: BaseException) -> BaseException:
        from sqlalchemy.exc import DBAPIError

        if not isinstance(exc, DBAPIError):
            return _unavailable() if isinstance(exc, OSError | TimeoutError) else exc
        orig = exc.orig
        state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
        number = orig.args[0] if orig is not None and orig.args and isinstance(orig.args[0], int) else None
        message = " ".join(str(orig if orig is not None else exc).split())[:300]
        if (
            state in _TIMEOUT_CODES
            or number in _MYSQL_TIMEOUT_CODES
            or (isinstance(orig, sqlite3.OperationalError) and "interrupted" in message)
        ):
            return self._timed_out()
        if state in _WRITE_CODES or number in _MYSQL_WRITE_CODES or "readonly database" in message:
            logger.warning("data tool %s: the database refused a write that passed the guard: %s", self.name, message)
            return SqlRefusedError("the database refused a write; the query may only read")
        if isinstance(orig, sqlite3.DatabaseError) and ("prohibited" in message or "not authorized" in message):
            logger.warning("data tool %s: SQLite's authorizer refused what passed the guard: %s", self.name, message)
            return SqlRefusedError(f"the database refused it ({message})")
        logger.info("data tool %s: the database could not run a query: %.300r", self.name, message)
        return ToolFailed(f"The database could not run the query: {message}", code="sql_error")


def _unavailable() -> ToolFailed:
    return ToolFailed("The database cannot be reached right now; try again later.", code="sql_unavailable")


def _check_number(value: object, label: str, *, low: float, high: float, integer: bool) -> None:
    kinds = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
        raise UserError(f"data_tool(): {label} must be {'an int' if integer else 'a number'} in [{low:g}, {high:g}]")


def _check_engine(engine: object) -> str:
    try:
        from sqlalchemy.ext.asyncio import AsyncEngine
    except ImportError:  # pragma: no cover - the sql extra is installed wherever the tests run
        raise UserError("data_tool() needs SQLAlchemy: pip install 'agora-gateway[sql]'") from None
    if not isinstance(engine, AsyncEngine):
        raise UserError(f"data_tool(): engine must be an SQLAlchemy AsyncEngine, not {type(engine).__name__}")
    dialect = engine.dialect
    if dialect.paramstyle not in PARAM_MARKS:
        raise UserError(f"data_tool(): the driver's paramstyle {dialect.paramstyle!r} is not supported")
    if dialect.name == "sqlite" and dialect.driver != "aiosqlite":
        raise UserError(f"data_tool(): SQLite runs through aiosqlite, not {dialect.driver!r}")
    return str(dialect.name)


def data_tool(
    engine: AsyncEngine,
    access: Mapping[str, Mapping[str, list[str]]],
    *,
    name: str = "execute_sql",
    description: str | None = None,
    tenant_column: str | None = None,
    shared_tables: Collection[str] = (),
    max_rows: int = 100,
    max_bytes: int = 16_000,
    max_cell_chars: int = 500,
    timeout: float = 5.0,
    deny_functions: Collection[str] = (),
    presentation: ToolPresentation | Mapping[str, Any] | None = DEFAULT_PRESENTATION,
    **options: Any,
) -> Tool:
    """A governed, read-only SQL tool over ``engine`` (PostgreSQL, SQLite, MySQL or MariaDB).

    The model sends ``{"sql": "SELECT ..."}``. The query is parsed with sqlglot in the engine's
    dialect and refused unless it is one read-only ``SELECT`` over tables that the caller's
    roles open; it is rewritten to the allowed tables' exact names, to the caller's tenant when
    ``tenant_column`` is set, and to at most ``max_rows`` rows; it runs in a read-only
    transaction that is stopped after ``timeout`` seconds and rolled back; the rows are cut to
    ``max_bytes`` of JSON before the model reads them. ``present`` draws them as a
    ``DataTable``. A refusal fails the call with a ``SqlRefusedError`` naming what was refused.

    Args:
        engine: The SQLAlchemy ``AsyncEngine`` the app reads through (asyncpg, aiosqlite, aiomysql...).
            Give it a role that may only read, too: the tool's checks are not the only wall.
        access: The required allow-list ``{role: {group: [tables]}}``. An actor's roles select
            the groups whose tables it may query (``"orders"``, ``"sales.orders"``, a view's name);
            the tool's ``roles`` gate is these roles, and its description lists the caller's
            tables. System catalogs are refused even if listed.
        name: The tool's name.
        description: The first paragraph of the description (the rules and tables follow).
        tenant_column: Filter every table by this column equal to ``ctx.actor.tenant_ref`` (a bound
            parameter); an actor without a tenant is refused.
        shared_tables: Listed tables that hold every tenant's rows alike (no tenant filter).
        max_rows: The most rows a query returns (``LIMIT`` injected or lowered).
        max_bytes: The most JSON bytes of output the model reads; rows past it are cut, with a note.
        max_cell_chars: Longer values are cut, with a note.
        timeout: Seconds a query may run before the database stops it.
        deny_functions: More function names to refuse, beside the built-in deny-lists.
        presentation: The words of the tool line (``None``: ``Working`` / ``Done``).
        **options: ``enabled``, ``is_enabled``, ``can_use`` or ``ability``, as for ``define_tool``.

    Raises:
        UserError: A wrong argument: not an ``AsyncEngine``, an empty or malformed allow-list,
            a system catalog listed, a shared table not listed, a number out of range.
    """
    from ._catalog import check_access

    dialect_name = _check_engine(engine)
    dialect = dialect_for(dialect_name)
    checked = check_access(access, dialect)
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise UserError(f"data_tool(): unknown option(s) {', '.join(unknown)}")
    if tenant_column is not None and (not isinstance(tenant_column, str) or not tenant_column):
        raise UserError("data_tool(): tenant_column must be a non-empty str")
    if isinstance(shared_tables, str):
        raise UserError("data_tool(): shared_tables must be a list of tables, not a str")
    shared = frozenset(shared_tables)
    unlisted = sorted(shared - set(checked.entries))
    if unlisted:
        raise UserError(f"data_tool(): shared_tables names tables the allow-list does not: {', '.join(unlisted)}")
    if isinstance(deny_functions, str) or not all(isinstance(f, str) and f for f in deny_functions):
        raise UserError("data_tool(): deny_functions must be a list of function names")
    _check_number(max_rows, "max_rows", low=1, high=10_000, integer=True)
    _check_number(max_bytes, "max_bytes", low=1_000, high=10_000_000, integer=True)
    _check_number(max_cell_chars, "max_cell_chars", low=20, high=100_000, integer=True)
    _check_number(timeout, "timeout", low=0.01, high=3_600, integer=False)
    intro = (description or "Run one read-only SQL query on the application's data and get the rows back.").strip()
    state = _DataTool(
        name=name,
        engine=engine,
        dialect=dialect,
        access=checked,
        runner=runner_for(dialect_name),
        paramstyle=engine.dialect.paramstyle,
        intro=intro,
        tenant_column=tenant_column,
        shared=shared,
        max_rows=max_rows,
        max_bytes=max_bytes,
        max_cell_chars=max_cell_chars,
        timeout=float(timeout),
        denied=frozenset(f.lower() for f in deny_functions),
    )
    tool: Tool = define_tool(
        name=name,
        description=f"{intro}\n\n{state.rules()}",
        input=SqlInput,
        kind="read",
        roles=sorted(checked.roles),
        presentation=_check_presentation(presentation, f"data_tool({name!r})"),
        execute=state.execute,
        present=state.present,
        describe=state.describe,
        **options,
    )
    return tool
