"""The guard: the model's SQL parsed, checked and rewritten before any database sees it.

Everything here works on sqlglot's parse tree, never on the text, and the SQL that runs is
generated from that tree (without comments), so a comment, a quote or an odd spelling can change
nothing that was checked. The rules, in order:

1. **One statement.** The text is tokenized in the engine's dialect; more than one non-empty
   statement, or one that does not start with ``SELECT``, ``WITH``, ``TABLE`` or ``(``, is refused
   before parsing. Unparseable SQL is refused.
2. **Reads only.** The root is a ``SELECT`` or a set operation of them (``UNION``...). No node
   anywhere may write (``INSERT``, ``UPDATE``, ``DELETE``, ``MERGE``, DDL, a data-modifying CTE),
   select ``INTO``, lock (``FOR UPDATE``/``FOR SHARE``), or use parameters and server variables.
3. **Functions.** A deny-list (``_dialects``) is checked on every call; schema-qualified calls
   are refused; only known table functions may stand in ``FROM``.
4. **Tables.** Every table reference is resolved with the scope of the ``WITH`` queries visible
   there (a CTE name is not a table; a CTE that is not visible at that point, by the strictest
   rule of the three databases, is taken to be a table). System catalogs are refused; every
   other table must be on the caller's allow-list. Each allowed reference is rewritten to the
   table's exact, schema-qualified, quoted name, so the database can only ever resolve it to the
   table that was allowed.
5. **Tenant scope.** A tenant-scoped table's reference becomes a subquery with the same alias,
   ``(SELECT * FROM "s"."t" WHERE "tenant_id" = <bound parameter>) AS t``: no predicate of the
   model's (``OR 1=1``, its own ``tenant_id = ...``) can reach past it.
6. **Row limit.** The outermost ``LIMIT`` is injected, or lowered to ``max_rows`` (also when it
   is not a plain number: ``LIMIT ALL``, ``LIMIT -1``, a subquery).
7. **Verified.** The generated SQL is parsed again and checked again: one read-only statement,
   every table qualified and allowed, every tenant-scoped table inside its filter.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import Token, TokenType, exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel, ParseError, SqlglotError, TokenError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from .._errors import SqlRefusedError
from ._dialects import PARAM_MARKS, SAFE_TABLE_FUNCTIONS, SqlDialect, is_denied_function

_SET_OPERATION: type[exp.Expression] = getattr(exp, "SetOperation", exp.Union)
_QUERY_STARTS = frozenset({TokenType.SELECT, TokenType.WITH, TokenType.L_PAREN, TokenType.TABLE})
_MAX_NAMES_LISTED = 30

# What each kind of node would do, in the words of the refusal. Looked up by name: sqlglot adds
# and renames classes between versions, and a name it lacks is simply not there to refuse.
_WRITES = {
    "Insert": "INSERT", "Update": "UPDATE", "Delete": "DELETE", "Merge": "MERGE", "Copy": "COPY",
    "LoadData": "LOAD DATA", "Export": "EXPORT", "Create": "CREATE", "Drop": "DROP", "Alter": "ALTER",
    "AlterColumn": "ALTER", "AlterRename": "ALTER", "AlterSet": "ALTER", "AlterSession": "ALTER",
    "TruncateTable": "TRUNCATE", "Set": "SET", "SetItem": "SET", "Transaction": "a transaction",
    "Commit": "COMMIT", "Rollback": "ROLLBACK", "Pragma": "PRAGMA", "Use": "USE", "Attach": "ATTACH",
    "Detach": "DETACH", "Grant": "GRANT", "Revoke": "REVOKE", "Analyze": "ANALYZE", "Kill": "KILL",
    "Describe": "DESCRIBE", "Show": "SHOW", "Comment": "COMMENT", "Execute": "EXECUTE",
    "ExecuteSql": "EXECUTE", "Declare": "DECLARE", "Install": "INSTALL", "Returning": "RETURNING",
    "OnConflict": "ON CONFLICT", "NextValueFor": "NEXT VALUE FOR", "Put": "PUT", "Get": "GET",
    "MultitableInserts": "INSERT", "ConditionalInsert": "INSERT", "StoredProcedure": "a procedure",
    "Block": "a block", "IfBlock": "a block", "WhileBlock": "a block", "LoopBlock": "a block",
    "RepeatBlock": "a block", "Return": "RETURN", "Cache": "CACHE", "Uncache": "UNCACHE",
    "Refresh": "REFRESH", "Summarize": "SUMMARIZE", "Undrop": "UNDROP", "SwapTable": "SWAP",
    "UserDefinedFunction": "a function definition", "Command": "a command",
}  # fmt: skip
_WRITE_NODES: tuple[tuple[type[exp.Expression], str], ...] = tuple(
    (cls, words) for name, words in _WRITES.items() if isinstance(cls := getattr(exp, name, None), type)
)
_PARAMETER_NODES: tuple[type[exp.Expression], ...] = tuple(
    cls
    for name in ("Placeholder", "Parameter", "SessionParameter", "PropertyEQ")
    if isinstance(cls := getattr(exp, name, None), type)
)
_SAFE_TABLE_FUNCTION_NODES = frozenset({"Unnest", "ExplodingGenerateSeries", "GenerateSeries", "JSONTable", "XMLTable"})
"""sqlglot's own nodes for the table functions of ``SAFE_TABLE_FUNCTIONS``."""
_CLASS = re.compile(r"<class 'sqlglot\.[\w.]*?(\w+)'>")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What a bare word sqlglot keeps as it was written (``LIMIT ALL``, a date part) may look like."""
_TYPE_TEXT = re.compile(r"[A-Za-z0-9_ (),.\[\]<>]*")
_TOKEN = re.compile(r"<Token token_type: TokenType\.\w+, text: (.*?), line: \d+, col: \d+.*?>")


@dataclass(frozen=True, kw_only=True)
class AllowedTable:
    """A table (or view) the caller may read, as the database names it."""

    schema: str
    """Its schema (database on MySQL, ``main`` on SQLite), exactly as stored."""
    name: str
    """Its name, exactly as stored."""
    label: str
    """How the model writes it (``orders``, ``sales.orders``): in messages and the description."""
    tenant_column: str | None = None
    """The column it is filtered by (exactly as stored), or ``None`` when it is not scoped."""


@dataclass(frozen=True, kw_only=True)
class GuardPolicy:
    """What one caller's query is checked against."""

    dialect: SqlDialect
    default_schema: str
    """Where an unqualified name lives (``public``, ``main``, the connection's database)."""
    tables: Mapping[tuple[str, str], AllowedTable]
    """The caller's tables by ``(schema, name)`` lookup keys (``SqlDialect.lookup_key``)."""
    max_rows: int
    denied_functions: frozenset[str] = frozenset()
    """The application's own additions to the deny-list (lowered)."""


@dataclass(frozen=True, kw_only=True)
class GuardedQuery:
    """A query that passed the guard, ready to bind and run."""

    sql: str
    """The generated SQL; tenant parameters are written as ``token``."""
    token: str
    placeholders: int
    """How many tenant parameters ``sql`` holds."""
    tables: tuple[str, ...]
    """Labels of the tables it reads, in order of first mention."""
    limited: bool
    """Whether the outer ``LIMIT`` was injected or lowered to ``max_rows``."""

    def bind(self, paramstyle: str, value: Any) -> tuple[str, Any]:
        """The SQL in the driver's ``paramstyle`` and its parameters (``None`` when there are none).

        With ``format``/``pyformat`` drivers every ``%`` is doubled: they %-format the whole text.
        """
        text = self.sql.replace("%", "%%") if paramstyle in ("format", "pyformat") else self.sql
        text = text.replace(self.token, PARAM_MARKS[paramstyle])
        if not self.placeholders:
            return text, None
        if paramstyle in ("qmark", "format"):
            return text, (value,) * self.placeholders
        if paramstyle in ("numeric", "numeric_dollar"):
            return text, (value,)
        return text, {"agora_tenant": value}

    def shown(self, paramstyle: str) -> str:
        """The SQL as it runs, for people to read (the tenant as its placeholder, not its value)."""
        return self.sql.replace(self.token, PARAM_MARKS[paramstyle])


def guard(sql: str, policy: GuardPolicy) -> GuardedQuery:
    """Check the model's ``sql`` against ``policy`` and rewrite it (see the module docstring).

    Raises:
        SqlRefusedError: Anything the rules refuse, with the reason the model reads.
    """
    try:
        return _guard(sql, policy)
    except RecursionError:
        raise SqlRefusedError("the query is nested too deeply to check") from None


def _guard(sql: str, policy: GuardPolicy) -> GuardedQuery:
    dialect = policy.dialect
    root = _unwrap(_parse_one(sql, dialect))
    _check_nodes(root, policy)
    references = _table_references(root, dialect)
    resolved = [(node, _resolve(node, policy)) for node in references]
    token = f"agora_tenant_{secrets.token_hex(8)}"
    placeholders = 0
    for node, table in resolved:
        if table.tenant_column is not None:
            node.replace(_scoped(node, table, token))
            placeholders += 1
        else:
            _qualify(node, table)
    limited = _limit(root, policy.max_rows)
    try:
        # Every identifier is written quoted (unquoted ones first folded as the dialect folds them):
        # a name the database would read differently unquoted (SQLite takes "$1" for a parameter)
        # can only be a name once it runs.
        root = normalize_identifiers(root, dialect=dialect.name)
        text = root.sql(dialect=dialect.name, comments=False, identify=True, unsupported_level=ErrorLevel.RAISE)
    except SqlglotError as exc:
        raise SqlRefusedError(f"the query could not be rewritten safely ({_one_line(str(exc))})") from None
    _verify(text, policy, token, placeholders)
    labels = list(dict.fromkeys(table.label for _, table in resolved))
    return GuardedQuery(sql=text, token=token, placeholders=placeholders, tables=tuple(labels), limited=limited)


# -- 1. one statement -------------------------------------------------------------------------------


def _statements(tokens: Sequence[Token]) -> list[list[Token]]:
    chunks: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            chunks.append([])
        else:
            chunks[-1].append(token)
    return [chunk for chunk in chunks if chunk]


def _parse_one(sql: str, dialect: SqlDialect) -> tuple[exp.Expression, str]:
    """The one statement of ``sql`` and its first word."""
    engine = Dialect.get_or_raise(dialect.name)
    try:
        tokens = engine.tokenize(sql)
    except TokenError as exc:
        raise SqlRefusedError(f"the SQL could not be read as {dialect.label} ({_one_line(str(exc))})") from None
    statements = _statements(tokens)
    if not statements:
        raise SqlRefusedError("the SQL is empty; send one SELECT statement")
    if len(statements) > 1:
        raise SqlRefusedError(f"send exactly one statement, not {len(statements)} (no ';' between statements)")
    first = statements[0][0]
    if first.token_type not in _QUERY_STARTS:
        raise SqlRefusedError(f"only a SELECT query is accepted, not {first.text.upper()}")
    try:
        trees = engine.parser(error_level=ErrorLevel.RAISE).parse(statements[0], sql)
    except ParseError as exc:
        raise SqlRefusedError(f"the SQL could not be parsed as {dialect.label} ({_parse_message(exc)})") from None
    except SqlglotError as exc:
        raise SqlRefusedError(f"the SQL could not be parsed as {dialect.label} ({_one_line(str(exc))})") from None
    found = [tree for tree in trees if isinstance(tree, exp.Expression) and not isinstance(tree, exp.Semicolon)]
    if len(found) != 1:
        raise SqlRefusedError("send exactly one statement")
    return found[0], first.text.upper()


def _parse_message(exc: ParseError) -> str:
    if not exc.errors:
        return _one_line(str(exc))
    error = exc.errors[0]
    description = _TOKEN.sub(lambda m: repr(m.group(1)), str(error.get("description", "")))
    description = _CLASS.sub(lambda m: m.group(1), description)
    return _one_line(f"{description}, line {error.get('line')}, column {error.get('col')}")


def _one_line(text: str, limit: int = 200) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _unwrap(parsed: tuple[exp.Expression, str]) -> exp.Expression:
    # "(SELECT ...)" parses as a Subquery; SQLite would refuse the parentheses once regenerated.
    root, first = parsed
    while isinstance(root, exp.Subquery):
        extra = sorted(key for key, value in root.args.items() if value and key != "this")
        if extra:
            raise SqlRefusedError("write the query without parentheses around all of it")
        root = root.this
    if not isinstance(root, exp.Select | _SET_OPERATION):
        raise SqlRefusedError(f"only a SELECT query is accepted, and this one is not (it starts with {first})")
    root.pop()  # detached from the parentheses it stood in
    return root


# -- 2 and 3. reads only, and the functions ---------------------------------------------------------


def _check_nodes(root: exp.Expression, policy: GuardPolicy) -> None:
    for node in root.walk():
        for cls, words in _WRITE_NODES:
            if isinstance(node, cls):
                raise SqlRefusedError(f"only reads are allowed, and this query holds {words}")
        if isinstance(node, exp.Into):
            raise SqlRefusedError("SELECT ... INTO is not allowed: the query may only read")
        if isinstance(node, exp.Lock):
            raise SqlRefusedError("locking clauses (FOR UPDATE, FOR SHARE, LOCK IN SHARE MODE) are not allowed")
        if isinstance(node, _PARAMETER_NODES):
            raise SqlRefusedError(
                "parameters and variables ($1, ?, :name, @var, @@var, :=) are not allowed; write values into the SQL"
            )
        if isinstance(node, exp.Table):
            _check_table_shape(node)
        if isinstance(node, exp.Func):
            _check_function(node, policy)
        if isinstance(node, exp.Var) and not _WORD.fullmatch(node.name):
            raise SqlRefusedError(f"{_one_line(node.name, 60)!r} is not a word the query may use there")
        if isinstance(node, exp.DataType) and not _TYPE_TEXT.fullmatch(node.sql(dialect=policy.dialect.name)):
            # sqlglot writes some type names as they were given, unquoted: a "type" can carry SQL.
            raise SqlRefusedError(f"{_one_line(node.sql(), 60)} is not a type the query may use")


def _check_table_shape(node: exp.Table) -> None:
    if node.args.get("rows_from"):
        raise SqlRefusedError("ROWS FROM (...) is not allowed")
    if not isinstance(node.this, exp.Identifier | exp.Func):
        raise SqlRefusedError(f"{_one_line(node.sql(), 80)} is not a table the query may read")


def function_names(node: exp.Func) -> set[str]:
    """Every (lowered) name a function call may be known by: as written, and sqlglot's names."""
    if isinstance(node, exp.Anonymous) or type(node).__name__ == "AnonymousAggFunc":
        return {node.name.lower()}
    return {name.lower() for name in node.sql_names()}


MAX_MADE_SIZE = 10_000
"""The largest length a function that makes a value of a given size may be asked for."""

_SIZED = {"randomblob": 0, "zeroblob": 0}
"""Functions (as ``exp.Anonymous``) whose argument at this index is the size of what they make."""

_PRINTF_WIDTH = re.compile(r"%[-+ 0#,!']*(\*|\d+)?(?:\.(\*|\d+))?")


def _made_size(node: exp.Func) -> tuple[str, exp.Expression | None] | None:
    """``(name, size argument)`` of a call that makes a value of a size it is given, else ``None``."""
    if isinstance(node, exp.Repeat):
        return "repeat", node.args.get("times")
    if isinstance(node, exp.Pad):
        return ("lpad" if node.args.get("is_left") else "rpad"), node.args.get("expression")
    if type(node).__name__ == "Space":
        return "space", node.args.get("this")
    if isinstance(node, exp.Anonymous) and node.name.lower() in _SIZED:
        arguments = node.expressions
        index = _SIZED[node.name.lower()]
        return node.name.lower(), arguments[index] if len(arguments) > index else None
    return None


def _check_sizes(node: exp.Func) -> None:
    """Refuse a value made to a size the query does not bound (``randomblob(1e9)``, ``repeat(x, 1e9)``).

    Such a value is a memory bomb in one step, which no time limit stops: its size must be a
    number written in the query, at most ``MAX_MADE_SIZE``.
    """
    made = _made_size(node)
    if made is not None:
        name, size = made
        if not (isinstance(size, exp.Literal) and not size.is_string and size.name.isdigit()):
            raise SqlRefusedError(f"{name}() takes its length as a number written in the query")
        if int(size.name) > MAX_MADE_SIZE:
            raise SqlRefusedError(f"{name}() may make at most {MAX_MADE_SIZE:,} characters, not {int(size.name):,}")
        inner = [made for f in node.find_all(exp.Func) if f is not node and (made := _made_size(f)) is not None]
        if inner:  # repeat(repeat(x, 10000), 10000): the sizes multiply
            raise SqlRefusedError(f"{name}() may not make a value of another sized value ({inner[0][0]}())")
    names = function_names(node)
    if names & {"printf", "format"}:
        template = node.this if isinstance(node, exp.Format) else (node.expressions or [None])[0]
        if not (isinstance(template, exp.Literal) and template.is_string):
            raise SqlRefusedError("printf() takes its format as a string written in the query")
        for width, precision in _PRINTF_WIDTH.findall(template.name):
            for part in (width, precision):
                if part == "*" or (part and int(part) > MAX_MADE_SIZE):
                    raise SqlRefusedError(f"printf() widths may be at most {MAX_MADE_SIZE:,}, written in the format")


def _check_function(node: exp.Func, policy: GuardPolicy) -> None:
    names = function_names(node)
    denied = sorted(name for name in names if is_denied_function(name, policy.denied_functions))
    if denied:
        raise SqlRefusedError(f"the function {denied[0]}() is not allowed")
    _check_sizes(node)
    parent = node.parent
    if isinstance(parent, exp.Dot) and node.arg_key == "expression":
        raise SqlRefusedError(f"schema-qualified function calls are not allowed ({_one_line(parent.sql(), 80)})")
    in_from = isinstance(parent, exp.Table | exp.Lateral | exp.From | exp.Join) and node.arg_key == "this"
    if in_from and not (names & SAFE_TABLE_FUNCTIONS) and type(node).__name__ not in _SAFE_TABLE_FUNCTION_NODES:
        raise SqlRefusedError(f"the function {min(names)}() may not be used as a table in FROM")


# -- 4. tables --------------------------------------------------------------------------------------


def _with_of(node: exp.Expression) -> exp.With | None:
    with_ = node.args.get("with_") or node.args.get("with")
    return with_ if isinstance(with_, exp.With) else None


def _cte_key(cte: exp.CTE, dialect: SqlDialect) -> str:
    alias = cte.args.get("alias")
    ident = alias.this if isinstance(alias, exp.TableAlias) else None
    if not isinstance(ident, exp.Identifier):
        raise SqlRefusedError("every WITH query needs a name")
    return dialect.cte_key(ident.name, bool(ident.quoted))


def _table_references(root: exp.Expression, dialect: SqlDialect) -> list[exp.Table]:
    """Every table reference of the tree (not CTE references, not table functions), in order."""
    found: list[exp.Table] = []
    stack: list[tuple[exp.Expression, frozenset[str]]] = [(root, frozenset())]
    while stack:
        node, visible = stack.pop()
        with_ = _with_of(node)
        if with_ is not None:
            names = [_cte_key(cte, dialect) for cte in with_.expressions]
            sees_itself = bool(with_.args.get("recursive")) or dialect.self_reference_is_cte
            # Pushed last-first so that they pop in order (only for the order of the messages).
            for index in reversed(range(len(with_.expressions))):
                seen = names[: index + 1] if sees_itself else names[:index]
                stack.append((with_.expressions[index], visible | frozenset(seen)))
            visible = visible | frozenset(names)
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            qualified = node.args.get("db") is not None or node.args.get("catalog") is not None
            if qualified or dialect.cte_key(node.name, bool(node.this.quoted)) not in visible:
                found.append(node)
        children: list[exp.Expression] = []
        for value in node.args.values():
            if value is with_:
                continue
            children.extend(item for item in _as_list(value) if isinstance(item, exp.Expression))
        stack.extend((child, visible) for child in reversed(children))
    return found


def _as_list(value: object) -> Iterable[object]:
    return value if isinstance(value, list) else (value,)


def _label(node: exp.Table) -> str:
    """The reference as the model wrote it, on one line and at most 80 characters (it is echoed)."""
    parts = [node.args.get("catalog"), node.args.get("db"), node.this]
    return _one_line(".".join(part.name for part in parts if isinstance(part, exp.Expression)), 80)


def _resolve(node: exp.Table, policy: GuardPolicy) -> AllowedTable:
    dialect = policy.dialect
    label = _label(node)
    db = node.args.get("db")
    if node.args.get("catalog") is not None:
        raise SqlRefusedError(f"{label}: three-part names are not allowed; write schema.table")
    if db is not None and not isinstance(db, exp.Identifier):
        raise SqlRefusedError(f"{label} is not a table the query may read")
    name = node.this
    if dialect.is_system(db.name if db is not None else None, name.name):
        raise SqlRefusedError(f"{label} is a system catalog; only the listed tables may be queried")
    schema_key = dialect.lookup_key(db.name, bool(db.quoted)) if db is not None else _default_key(policy)
    table = policy.tables.get((schema_key, dialect.lookup_key(name.name, bool(name.quoted))))
    if table is None:
        raise SqlRefusedError(f"table {label} is not one you may query (you may query: {_listed(policy)})")
    return table


def _default_key(policy: GuardPolicy) -> str:
    return policy.dialect.lookup_key(policy.default_schema, True)


def _listed(policy: GuardPolicy) -> str:
    labels = sorted({table.label for table in policy.tables.values()})
    more = len(labels) - _MAX_NAMES_LISTED
    return ", ".join(labels[:_MAX_NAMES_LISTED]) + (f" and {more} more" if more > 0 else "") if labels else "none"


def _identifier(name: str) -> exp.Identifier:
    return exp.Identifier(this=name, quoted=True)


def _qualify(node: exp.Table, table: AllowedTable) -> None:
    """Point ``node`` at the allowed table by its exact name; the alias keeps what the model wrote."""
    if node.args.get("alias") is None:
        node.set("alias", exp.TableAlias(this=node.this.copy()))
    node.set("this", _identifier(table.name))
    node.set("db", _identifier(table.schema))
    node.set("catalog", None)


def _scoped(node: exp.Table, table: AllowedTable, token: str) -> exp.Subquery:
    """``(SELECT * FROM "schema"."table" WHERE "tenant" = <token>) AS alias`` in place of ``node``."""
    if any(node.args.get(key) for key in ("joins", "laterals", "pivots")):
        raise SqlRefusedError(f"write the joins of {table.label} without parentheses around them")
    alias = node.args.get("alias")
    alias = alias.copy() if isinstance(alias, exp.TableAlias) else exp.TableAlias(this=node.this.copy())
    inner = node.copy()
    inner.set("alias", None)
    inner.set("this", _identifier(table.name))
    inner.set("db", _identifier(table.schema))
    inner.set("catalog", None)
    assert table.tenant_column is not None
    condition = exp.EQ(this=exp.Column(this=_identifier(table.tenant_column)), expression=exp.Var(this=token))
    select = exp.select(exp.Star()).from_(inner, copy=False).where(condition, copy=False)
    return exp.Subquery(this=select, alias=alias)


# -- 6. the row limit -------------------------------------------------------------------------------


def _literal_count(limit: exp.Expression | None) -> int | None:
    if isinstance(limit, exp.Fetch):
        options = limit.args.get("limit_options")
        if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
            return None
        value = limit.args.get("count")
    elif isinstance(limit, exp.Limit):
        value = limit.args.get("expression")
    else:
        return None
    if isinstance(value, exp.Literal) and not value.is_string and str(value.this).isdigit():
        return int(str(value.this))
    return None


def _limit(root: exp.Expression, max_rows: int) -> bool:
    current = root.args.get("limit")
    count = _literal_count(current)
    if current is not None and count is not None and count <= max_rows:
        return False
    if isinstance(current, exp.Limit):
        current.set("expression", exp.Literal.number(max_rows))
    else:
        root.set("limit", exp.Limit(expression=exp.Literal.number(max_rows)))
    return True


# -- 7. verified ------------------------------------------------------------------------------------


def _verify(text: str, policy: GuardPolicy, token: str, placeholders: int) -> None:
    """Parse the SQL about to run and hold it to the rules once more (fails closed on a bug here)."""
    if text.count(token) != placeholders:
        raise SqlRefusedError("the query could not be rewritten safely (tenant filter)")
    root = _unwrap(_parse_one(text, policy.dialect))
    _check_nodes(root, policy)
    canonical = {(t.schema, t.name): t for t in policy.tables.values()}
    for node in _table_references(root, policy.dialect):
        db = node.args.get("db")
        key = (db.name if isinstance(db, exp.Identifier) else "", node.name)
        table = canonical.get(key)
        if table is None or not node.this.quoted or node.args.get("catalog") is not None:
            raise SqlRefusedError(f"the query could not be rewritten safely ({_label(node)})")
        if table.tenant_column is not None and not _inside_filter(node, table.tenant_column, token):
            raise SqlRefusedError(f"the query could not be rewritten safely (tenant filter of {table.label})")


def _inside_filter(node: exp.Table, column: str, token: str) -> bool:
    select = node.parent.parent if isinstance(node.parent, exp.From) else None
    if not isinstance(select, exp.Select) or not isinstance(select.parent, exp.Subquery):
        return False
    where = select.args.get("where")
    condition = where.this if isinstance(where, exp.Where) else None
    if not isinstance(condition, exp.EQ) or select.args.get("joins"):
        return False
    left, right = condition.this, condition.expression
    return (
        isinstance(left, exp.Column)
        and left.name == column
        and left.args.get("table") is None
        and isinstance(right, exp.Column)
        and right.name == token
    )
