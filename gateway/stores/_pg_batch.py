"""``WriteBatch``: the writes of one ``guarded`` call, sent to PostgreSQL as ONE prepared statement.

A guarded call (``_sql_tx``) reads, then only writes. ``PostgresStore`` keeps those writes here
and sends them together, each write a data-modifying CTE, the guards checked by the main query::

    WITH g0 AS (UPDATE threads SET ... WHERE thread_id = $1 AND version = $7 RETURNING 1),
         w1 AS (INSERT INTO events (thread_id, seq, body) VALUES ($9, $10, $11), ($12, $13, $14)),
         w2 AS (INSERT INTO runs ... ON CONFLICT (run_id) DO UPDATE SET ...)
    SELECT 1 / (SELECT count(*) FROM g0), pg_notify($19, $20)

One statement is one round trip and one implicit transaction. When a guard's row changed, its
count is 0 and the division aborts the whole statement: nothing is written, the store runs the
call again (``_Conflict``). Every value is a bound parameter, so nothing is rendered into SQL
text, and the text depends only on the batch's shape (which writes, how many rows each), never
on its values: asyncpg prepares each shape once per connection and caches it, and the server
neither parses nor plans it again (its generic plan).

What the logic owes this (all sub-statements see the same snapshot): no two writes of one call
touch the same row (a new thread is one ``INSERT`` of its whole row; a batch's approvals are
distinct), and a ``put_many`` statement has its placeholders in one ``VALUES (...)`` tuple.

PostgreSQL takes at most 32767 parameters per statement: a batch with more (thousands of
events) is sent as a transaction of its statements instead, one round trip each.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any, Literal

import asyncpg

from ._sql_tx import _Conflict

__all__ = ["WriteBatch", "changed"]

Kind = Literal["guard", "put", "notify"]
Shape = tuple[tuple[Kind, str, int], ...]
"""Each write's kind, statement and number of rows: all that the composed text depends on."""

MAX_ARGS = 32767
"""Bound parameters PostgreSQL takes in one statement."""

_PLACEHOLDER = re.compile(r"\$(\d+)")
_VALUES = re.compile(r"^(.*?\bVALUES\s*)(\([^()]*\))(.*)$", re.DOTALL | re.IGNORECASE)
_NOTIFY = "SELECT pg_notify($1, $2)"


def changed(status: str) -> int:
    """The row count of a command status (``UPDATE 1``, ``INSERT 0 3``); 0 when it has none."""
    count = status.rpartition(" ")[2]
    return int(count) if count.isdigit() else 0


def _shifted(sql: str, offset: int) -> str:
    """``sql`` with each ``$n`` numbered ``$(n + offset)``."""
    return _PLACEHOLDER.sub(lambda match: f"${int(match[1]) + offset}", sql)


def _width(sql: str) -> int:
    return max((int(number) for number in _PLACEHOLDER.findall(sql)), default=0)


def _rows_text(sql: str, rows: int, offset: int) -> tuple[str, int]:
    """``sql`` for ``rows`` rows of arguments from ``$(offset + 1)`` on, and the arguments it takes."""
    width = _width(sql)
    if rows == 1:
        return _shifted(sql, offset), width
    found = _VALUES.match(sql)
    if found is None or _PLACEHOLDER.search(found[1] + found[3]):
        raise RuntimeError(f"a put_many statement must have its placeholders in one VALUES tuple: {sql}")
    head, row, tail = found.groups()
    values = ", ".join(_shifted(row, offset + index * width) for index in range(rows))
    return f"{head}{values}{tail}", width * rows


@functools.lru_cache(maxsize=512)
def _composed(shape: Shape) -> str:
    """The one statement of a batch of that shape."""
    ctes: list[str] = []
    checks: list[str] = []
    offset = 0
    for index, (kind, sql, rows) in enumerate(shape):
        text, taken = _rows_text(sql, rows, offset)
        offset += taken
        if kind == "guard":
            ctes.append(f"g{index} AS ({text} RETURNING 1)")
            checks.append(f"1 / (SELECT count(*) FROM g{index})")
        elif kind == "notify":
            checks.append(text.removeprefix("SELECT "))
        else:
            ctes.append(f"w{index} AS ({text})")
    head = f"WITH {', '.join(ctes)} " if ctes else ""
    return f"{head}SELECT {', '.join(checks) or '1'}"


class WriteBatch:
    """The writes a guarded call issued, in order, until it ends and they are sent."""

    __slots__ = ("_args", "_writes")

    def __init__(self) -> None:
        self._writes: list[tuple[Kind, str, Sequence[Sequence[Any]]]] = []
        self._args = 0

    def __bool__(self) -> bool:
        return bool(self._writes)

    def add(self, kind: Kind, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Keep a write (``guard``: it must change exactly one row) of one or more rows of arguments."""
        if rows:
            self._writes.append((kind, sql, rows))
            self._args += len(rows) * len(rows[0])

    def notify(self, channel: str, payload: str) -> None:
        """Notify ``channel`` once the batch commits."""
        self.add("notify", _NOTIFY, [(channel, payload)])

    def statement(self) -> tuple[str, list[Any]]:
        """The one statement and its arguments."""
        shape = tuple((kind, sql, len(rows)) for kind, sql, rows in self._writes)
        return _composed(shape), [value for _, _, rows in self._writes for row in rows for value in row]

    async def send(self, connection: Any) -> None:
        """Send the writes (one statement, or a transaction when too many arguments for one).

        Raises:
            _Conflict: A guard's row changed: nothing was written.
        """
        if self._args > MAX_ARGS:
            await self._send_apart(connection)
            return
        sql, args = self.statement()
        try:
            await connection.execute(sql, *args)
        except asyncpg.DivisionByZeroError as exc:  # a guard's row changed: nothing was written
            raise _Conflict(str(exc)) from exc

    async def _send_apart(self, connection: Any) -> None:
        async with connection.transaction():
            for kind, sql, rows in self._writes:
                if kind == "guard":
                    if changed(await connection.execute(sql, *rows[0])) != 1:
                        raise _Conflict(sql)
                elif len(rows) == 1:
                    await connection.execute(sql, *rows[0])
                else:
                    await connection.executemany(sql, rows)
