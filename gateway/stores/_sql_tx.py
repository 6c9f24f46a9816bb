"""``Tx``: the little an SQL adapter offers the store logic, and the helpers that logic shares.

The store logic (``_sql_log``, ``_sql_state``) is written once, as ``async`` functions over a
``Tx``, and both SQL stores run it: ``SqliteStore`` drives each function to its end inside its
writer thread without an event loop (a ``Tx`` of SQLite never suspends), ``PostgresStore`` awaits
it on a pooled asyncpg connection. So the logic awaits nothing but its ``Tx``.

A call runs in one of three modes (``Mode``):

- ``autocommit``: each statement commits on its own (reads, and single-statement writes).
- ``guarded``: the call reads first, then only writes (``put``, ``guard``); the writes apply
  together or not at all, and each ``guard`` checks that a row is still as the call read it.
  When one is not, the adapter raises ``_Conflict`` and the store runs the whole call again, on
  fresh reads. On PostgreSQL the writes go in one round trip (one implicit transaction); on
  SQLite the whole call is one ``BEGIN IMMEDIATE`` transaction, so a guard fails only on a
  stale cached read.
- ``locked``: one transaction; rows read with ``Dialect.lock`` (or ``skip_locked``) stay locked
  until it ends.

SQL is written with ``$1, $2`` numbered placeholders (SQLite's adapter rewrites them to ``?1``).
What differs between the dialects is in ``Dialect`` (row locks, column types) and in the adapters
(``notify``, how writes are sent).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from pydantic import TypeAdapter

from tools import AgoraError

from ..events import RunEvent
from ..models import MESSAGE_ADAPTER, AssistantMessage, ToolMessage, UserMessage
from ._records import JournalEntry
from ._sql_schema import Dialect

__all__ = [
    "EVENTS",
    "JOURNAL",
    "Mode",
    "Row",
    "Tx",
    "as_iso",
    "parse_events",
    "parse_joined_messages",
    "parse_journal",
    "parse_messages",
]

Row = Sequence[Any]
"""A result row: its columns in the order the ``SELECT`` names them."""

Mode = Literal["autocommit", "guarded", "locked"]
"""How a call's statements are run (see the module docstring)."""


class _Conflict(AgoraError):
    """A ``guard`` found its row changed since the call read it: the call runs again (private signal)."""


EVENTS: TypeAdapter[list[RunEvent]] = TypeAdapter(list[RunEvent])
JOURNAL: TypeAdapter[list[JournalEntry]] = TypeAdapter(list[JournalEntry])


class Tx(Protocol):
    """One transaction of an adapter, or for a call that is not atomic, a connection in autocommit.

    In autocommit each statement commits on its own.
    Statements run in the order the logic issues them; a ``put`` may be sent later than issued,
    but always before the next read and before the commit, so the logic reads what it wrote.
    """

    dialect: Dialect

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        """Every row the statement answers."""
        ...

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        """The first row the statement answers, or ``None``."""
        ...

    async def execute(self, sql: str, *args: Any) -> int:
        """Run a statement now; the number of rows it changed (not in ``guarded`` mode)."""
        ...

    async def guard(self, sql: str, *args: Any) -> None:
        """Run a write that must change exactly one row; when it does not, ``_Conflict``.

        The statement is an ``INSERT``, ``UPDATE`` or ``DELETE`` without ``RETURNING``, whose
        ``WHERE`` says what the call read (a row's ``version``, say).
        """
        ...

    async def put(self, sql: str, *args: Any) -> None:
        """Run a statement whose result the logic does not read."""
        ...

    async def put_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run a statement once per row of arguments; nothing is read back."""
        ...

    async def notify(self, thread_id: str, events: list[RunEvent], bodies: list[str]) -> None:
        """Announce the thread's new events (``bodies`` are their JSON) once the transaction commits."""
        ...


def _join(bodies: Sequence[str]) -> str:
    return "[" + ",".join(bodies) + "]"


def parse_events(bodies: Sequence[str]) -> list[RunEvent]:
    """Stored event JSON as events, in one pydantic call."""
    return EVENTS.validate_json(_join(bodies)) if bodies else []


def parse_journal(bodies: Sequence[str]) -> list[JournalEntry]:
    """Stored journal entries, in one pydantic call."""
    return JOURNAL.validate_json(_join(bodies)) if bodies else []


def parse_messages(bodies: Sequence[str]) -> list[UserMessage | AssistantMessage | ToolMessage]:
    """Stored history messages, in one pydantic call."""
    return MESSAGE_ADAPTER.validate_json(_join(bodies)) if bodies else []


def parse_joined_messages(joined: str) -> list[UserMessage | AssistantMessage | ToolMessage]:
    """Stored history messages whose bodies the database joined with commas (``Dialect.joined_bodies``)."""
    return MESSAGE_ADAPTER.validate_json(f"[{joined}]")


def as_iso(ts: float) -> str:
    """UNIX seconds as the ISO-8601 text of ``now_iso`` (UTC, milliseconds)."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")
