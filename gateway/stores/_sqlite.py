"""``SqliteStore``: the embedded store, one SQLite file, driven from one thread of its own.

The event loop never touches SQLite. The store owns a writer thread and the one connection it
opens: each store call is one job for that thread, a whole transaction (``BEGIN IMMEDIATE`` ...
``COMMIT``) run as one function, so a call costs one hop between the loop and the thread however
many statements it runs. The logic is the SQL stores' shared ``async`` code (``_sql``): its
``Tx`` of SQLite never suspends, so the thread drives each call's coroutine to its end with one
``send`` and no event loop of its own.

The file is in WAL mode with ``synchronous=NORMAL`` (a commit is not flushed to disk at once: a
power cut may lose the last transactions, never corrupt the file) and a busy timeout, so another
process opening the same file waits for the lock rather than failing. The WAL is copied back into
the file by a second thread (``_Checkpointer``), not inside a commit: a store call never waits
for those flushes to disk behind another's commit. Live tails are fed in this
process once a transaction has committed: a second process writing the same file is not heard,
so serve several processes from PostgreSQL (or Redis).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import queue
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from .._errors import StoreUnavailableError
from ..events import RunEvent
from ._sql import SqlStore, Work
from ._sql_schema import Dialect
from ._sql_tx import Mode, Row, Tx, _Conflict

__all__ = ["SqliteStore"]

T = TypeVar("T")

_DIALECT = Dialect(
    name="sqlite",
    lock="",  # one writer: a transaction holds the whole database from BEGIN IMMEDIATE on
    skip_locked="",
    types={
        "id": "INTEGER PRIMARY KEY",
        "float": "REAL",
        "blob": "BLOB",
        "bytewise": "",  # BINARY, the default: UTF-8 bytes, in code point order
        "requested_epoch": "(julianday(json_extract(record, '$.requested_at')) - 2440587.5) * 86400.0",
    },
)

_PLACEHOLDER = re.compile(r"\$(\d+)")

_REFUSED = (sqlite3.IntegrityError, sqlite3.DataError, sqlite3.ProgrammingError, sqlite3.InterfaceError)
"""What SQLite raises for a value it cannot take (as opposed to a database it cannot use)."""

_CHECKPOINT_ROWS = 512
"""Rows written between two checkpoint requests: some 80 writes of a turn, 600 to 900 pages of
WAL (SQLite's own threshold is 1000 pages)."""

logger = logging.getLogger("gateway.stores.sqlite")

Notes = list[tuple[str, list[RunEvent]]]
"""Events a transaction wrote, by thread: pushed to live tails once it committed."""


@functools.lru_cache(maxsize=1024)
def _numbered(sql: str) -> str:
    """``$1`` placeholders as SQLite's ``?1`` (the same numbers: a parameter may be used twice)."""
    return _PLACEHOLDER.sub(r"?\1", sql)


class _SqliteTx:
    """A ``Tx`` on the writer thread's connection: every method runs at once and never suspends."""

    __slots__ = ("_connection", "_notes", "dialect")

    def __init__(self, connection: sqlite3.Connection, notes: Notes) -> None:
        self.dialect = _DIALECT
        self._connection = connection
        self._notes = notes

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        rows: list[Row] = self._connection.execute(_numbered(sql), args).fetchall()
        return rows

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        rows = self._connection.execute(_numbered(sql), args).fetchall()  # all: a RETURNING runs to its end
        return rows[0] if rows else None

    async def execute(self, sql: str, *args: Any) -> int:
        return self._connection.execute(_numbered(sql), args).rowcount

    async def guard(self, sql: str, *args: Any) -> None:
        if self._connection.execute(_numbered(sql), args).rowcount != 1:
            raise _Conflict(sql)

    async def put(self, sql: str, *args: Any) -> None:
        self._connection.execute(_numbered(sql), args)

    async def put_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._connection.executemany(_numbered(sql), rows)

    async def notify(self, thread_id: str, events: list[RunEvent], bodies: list[str]) -> None:
        self._notes.append((thread_id, events))


def _drive(work: Work[T], tx: Tx) -> T:
    """Run the logic's coroutine to its end in this thread (it never suspends on a ``_SqliteTx``)."""
    coroutine = work(tx)
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("SQL store logic awaited something other than its transaction")


def _translate(exc: BaseException, where: str) -> BaseException:
    """SQLite's errors as the store's: a refused value is a ``ValueError``, the rest an outage."""
    if isinstance(exc, _REFUSED):
        refused = ValueError(f"SQLite refused a value: {exc}")
        refused.__cause__ = exc
        return refused
    if isinstance(exc, sqlite3.Error | OSError):
        unavailable = StoreUnavailableError(f"SQLite at {where} is unavailable: {exc}")
        unavailable.__cause__ = exc
        return unavailable
    return exc


_Job = tuple[Callable[[sqlite3.Connection], Any], "asyncio.Future[Any]", asyncio.AbstractEventLoop, Callable[[], None]]


def _finish(future: asyncio.Future[Any], result: Any, error: BaseException | None, after: Callable[[], None]) -> None:
    """On the loop, in commit order: feed the live tails, then wake the caller (unless it gave up)."""
    if error is None:
        after()
        if not future.done():
            future.set_result(result)
    elif not future.done():
        future.set_exception(error)


def _stop(stopped: asyncio.Future[None]) -> None:
    if not stopped.done():
        stopped.set_result(None)


class _Checkpointer:
    """A thread of its own that copies the WAL back into the database file, so commits seldom wait for it.

    SQLite's automatic checkpoint runs inside the commit that crosses its threshold, on the
    writer thread: every store call queued behind that commit waits for the copy and its two
    flushes to disk. The writer's connection turns it off (``wal_autocheckpoint = 0``) and asks
    this thread instead, every ``_CHECKPOINT_ROWS`` rows written; it runs a ``PASSIVE``
    checkpoint on a connection of its own, which neither waits for the writer nor blocks it.

    The WAL starts over from its beginning only when a write finds every frame copied, which a
    checkpoint racing a busy writer never leaves behind: once this thread is done, the writer
    finishes the checkpoint itself between two jobs (``finish``: the few frames written
    meanwhile), and its next commit starts the WAL over. A checkpoint that fails (the disk,
    another process checkpointing) is tried again next time.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._wanted = threading.Event()
        self._copied = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def request(self) -> None:
        """Checkpoint soon (the thread starts with the first request)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name="agora-sqlite-checkpoint", daemon=True)
            self._thread.start()
        self._wanted.set()

    def finish(self, connection: sqlite3.Connection) -> None:
        """On the writer, between jobs: complete a checkpoint this thread did, so the WAL starts over."""
        if self._copied.is_set():
            self._copied.clear()
            _checkpoint(connection, self._path)

    def stop(self) -> None:
        """End the thread after the checkpoint in progress (called on the writer thread, which then closes)."""
        self._stopping = True
        self._wanted.set()
        if self._thread is not None:
            self._thread.join()

    def _main(self) -> None:
        connection: sqlite3.Connection | None = None
        try:
            while True:
                self._wanted.wait()
                self._wanted.clear()
                if self._stopping:
                    return
                try:
                    if connection is None:
                        connection = sqlite3.connect(self._path, isolation_level=None)
                except sqlite3.Error as exc:
                    logger.warning("SQLite at %s: cannot open a connection to checkpoint: %s", self._path, exc)
                    continue
                if _checkpoint(connection, self._path):
                    self._copied.set()
        finally:
            if connection is not None:
                connection.close()


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused for another connection's lock (``SQLITE_BUSY`` / ``SQLITE_LOCKED``, any variant)."""
    return exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _checkpoint(connection: sqlite3.Connection, path: str) -> bool:
    """A ``PASSIVE`` checkpoint; ``False`` (and a log line) when it failed."""
    try:
        connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    except sqlite3.Error as exc:
        logger.warning("SQLite at %s: a checkpoint failed (tried again later): %s", path, exc)
        return False
    return True


class _Writer:
    """The thread that owns the connection and runs one job (one transaction) after another."""

    def __init__(self, path: str, *, busy_timeout: float) -> None:
        self._path = path
        self._busy_ms = max(0, int(busy_timeout * 1000))
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Future[None] | None = None
        self._checkpointer: _Checkpointer | None = None
        self._checkpointed_at = 0
        self.closed = False

    def _open(self) -> sqlite3.Connection:
        if self._path != ":memory:":
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self._path, isolation_level=None, cached_statements=256)
        try:
            connection.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            journal = self._wal(connection)
            connection.execute("PRAGMA synchronous = NORMAL")
            if journal == "wal":  # a file (an in-memory database has no WAL)
                connection.execute("PRAGMA wal_autocheckpoint = 0")
                self._checkpointer = _Checkpointer(self._path)
        except BaseException:
            connection.close()
            raise
        return connection

    def _wal(self, connection: sqlite3.Connection) -> str:
        """Put the file in WAL mode unless it is already; the journal mode it ends in.

        A second store (another process) opening a file that is busy with writes once met
        "database is locked" from ``PRAGMA journal_mode = WAL`` in CI, past the busy timeout
        (issue 17's two-store usage test; not reproduced on demand). The mode is therefore read
        first and set only when it is not WAL already (a switch needs a lock a read does not),
        and a read or a switch refused for a lock is tried again until the busy timeout.
        """
        deadline = time.monotonic() + self._busy_ms / 1000
        while True:
            try:
                [(journal,)] = connection.execute("PRAGMA journal_mode").fetchall()
                if journal != "wal":
                    [(journal,)] = connection.execute("PRAGMA journal_mode = WAL").fetchall()
                break
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)  # noqa: TID251 (the writer thread, not the event loop)
        return str(journal)

    def _written(self, connection: sqlite3.Connection) -> None:
        """After a job: finish a checkpoint, or ask for one once enough rows were written since the last."""
        if self._checkpointer is None:
            return
        self._checkpointer.finish(connection)
        if connection.total_changes - self._checkpointed_at >= _CHECKPOINT_ROWS:
            self._checkpointed_at = connection.total_changes
            self._checkpointer.request()

    def _main(self, stopped: asyncio.Future[None], loop: asyncio.AbstractEventLoop) -> None:
        connection: sqlite3.Connection | None = None
        try:
            while (job := self._jobs.get()) is not None:
                run, future, caller, after = job
                result: Any = None
                error: BaseException | None = None
                try:
                    if connection is None:
                        connection = self._open()
                    result = run(connection)
                except BaseException as exc:  # handed to the caller, translated
                    error = _translate(exc, self._path)
                try:
                    caller.call_soon_threadsafe(_finish, future, result, error, after)
                except RuntimeError:
                    pass  # the caller's loop closed: nobody waits for this job
                if connection is not None:
                    self._written(connection)
        finally:
            if self._checkpointer is not None:
                self._checkpointer.stop()  # before the last connection closes (and checkpoints it all)
            if connection is not None:
                connection.close()
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                loop.call_soon_threadsafe(_stop, stopped)

    async def run(self, job: Callable[[sqlite3.Connection], T], *, after: Callable[[], None]) -> T:
        """Run ``job`` on the thread; ``after`` runs on the loop once it succeeded, before this returns."""
        if self.closed:
            raise RuntimeError("Cannot use a closed SqliteStore")
        loop = asyncio.get_running_loop()
        if self._thread is None:
            self._stopped = loop.create_future()
            self._thread = threading.Thread(
                target=self._main, args=(self._stopped, loop), name="agora-sqlite", daemon=True
            )
            self._thread.start()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((job, future, loop, after))
        return await future

    async def aclose(self) -> None:
        """Finish the jobs already queued, close the connection and end the thread."""
        if self.closed:
            return
        self.closed = True
        if self._thread is None or self._stopped is None:
            return
        self._jobs.put(None)
        await self._stopped


class SqliteStore(SqlStore):
    """Everything in one SQLite file: conversations and pending approvals survive a restart.

    Serves one process (live tails are fed in-process); use ``PostgresStore`` or ``RedisStore``
    for several. The file and its folder are created on first use.
    """

    dialect: ClassVar[Dialect] = _DIALECT

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0, sweep_interval: float = 60.0
    ) -> None:
        """Use the SQLite database at ``path`` (``":memory:"`` for one that lives as long as the store).

        Args:
            path: The database file.
            busy_timeout: Seconds a transaction waits for another process's lock on the file.
            sweep_interval: Seconds between two deletions of expired rows.
        """
        self.path = os.fspath(path)
        super().__init__(where=self.path, sweep_interval=sweep_interval)
        self._writer = _Writer(self.path, busy_timeout=busy_timeout)

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    async def _transact(self, work: Work[T], *, mode: Mode) -> T:
        notes: Notes = []
        atomic = mode != "autocommit"  # guarded and locked calls alike: one IMMEDIATE transaction

        def job(connection: sqlite3.Connection) -> T:
            if atomic:
                connection.execute("BEGIN IMMEDIATE")
            try:
                result = _drive(work, _SqliteTx(connection, notes))
                if atomic:
                    connection.execute("COMMIT")
            except BaseException:
                notes.clear()
                if connection.in_transaction:
                    with contextlib.suppress(sqlite3.Error):  # the first failure is the one to tell
                        connection.execute("ROLLBACK")
                raise
            return result

        def published() -> None:
            for thread_id, events in notes:
                self._followers.push(thread_id, events)

        return await self._writer.run(job, after=published)

    async def aclose(self) -> None:
        """Finish the calls in flight, close the database and stop the thread; idempotent."""
        await self._writer.aclose()
