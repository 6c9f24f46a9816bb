"""``SqlStore``: the ``Store`` protocol once for both SQL stores, over an adapter's transactions.

``SqliteStore`` and ``PostgresStore`` are this class plus an adapter: how a transaction runs
(``_transact``), what happens before the schema is migrated (``_prepare``), and how a live tail
attaches to the feed (``_attach``). The logic of every call lives in ``_sql_log`` and
``_sql_state`` as ``async`` functions over a ``Tx`` (``_sql_tx``); the tables in ``_sql_schema``.

The schema is created and migrated by the store itself, the first time it is used (``ping``
does it at start-up); a database migrated by a newer agora-gateway is refused with a
``UserError`` saying so, on every call, and nothing in it is changed.

Every write names its batch (``Batch.write_id``) before the first attempt, so the same batch
written again, after a reply that never came, is applied once (see ``_sql_log``).
"""

from __future__ import annotations

import asyncio
import os
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from .._errors import StoreUnavailableError
from ..events import RunEvent, Turn
from ..models import AssistantMessage, ToolMessage, UserMessage
from . import _sql_log as log
from . import _sql_state as state
from . import _sql_usage as usage
from ._records import (
    ApprovalRecord,
    ApprovalState,
    Batch,
    Begun,
    ModelStepEntry,
    PreflightEntry,
    QueuedMessage,
    RunRecord,
    ThreadRecord,
    ThreadSummary,
    ToolSettledEntry,
    UsageEntry,
    UsageRow,
    UsageTotals,
)
from ._sql_log import ThreadStates
from ._sql_schema import META, Dialect, check_version, migration
from ._sql_tx import Mode, Tx, _Conflict
from ._tail import Followers, Subscriber, follow
from ._usage import check_bucket

if TYPE_CHECKING:
    from ._sql_caches import SqlMediaBackend, SqlRenderCache

__all__ = ["SqlStore", "Work"]

T = TypeVar("T")
Work = Callable[[Tx], Coroutine[Any, Any, T]]
"""One store call's transaction: an ``async`` function of the logic over a ``Tx``."""

_TRIES = 64
"""Times a ``guarded`` call runs again after finding its thread changed (writers racing on it)."""

Entry = ModelStepEntry | ToolSettledEntry | PreflightEntry
Message = UserMessage | AssistantMessage | ToolMessage


def _name_write(batch: Batch) -> str:
    """Give ``batch`` its write id for good: the same batch written again is the same write."""
    if not batch.write_id:
        batch.write_id = os.urandom(16).hex()
    return batch.write_id


class SqlStore(ABC):
    """The ``Store`` protocol over SQL, for ``SqliteStore`` and ``PostgresStore``.

    Args:
        where: How messages name the database (a path, a DSN without its password).
        sweep_interval: Seconds between two deletions of expired rows (channel state, confirm
            tokens, media, renders); expired rows are never answered meanwhile.
    """

    dialect: ClassVar[Dialect]
    reads_are_round_trips: ClassVar[bool] = False
    """Whether a read costs a round trip to a server (then a turn on a thread this store never
    wrote begins by trying to create it, without reading it first: see ``begin_run``)."""

    def __init__(self, *, where: str, sweep_interval: float = 60.0) -> None:
        self._where = where
        self._followers = Followers()
        self._states = ThreadStates()
        self._ready = False
        self._migrating = asyncio.Lock()
        self._sweep_interval = sweep_interval
        self._next_sweep = time.time() + sweep_interval

    @property
    def followers(self) -> Followers:
        """Who follows which thread in this process (the live tails this store feeds)."""
        return self._followers

    # -- what an adapter provides -------------------------------------------------------------------

    @abstractmethod
    async def _transact(self, work: Work[T], *, mode: Mode) -> T:
        """Run ``work`` in ``mode`` (see ``_sql_tx``) and answer its result.

        Raises:
            _Conflict: A guard of a ``guarded`` call found its row changed (nothing was written).
            StoreUnavailableError: The database cannot be reached (or failed).
        """

    async def _prepare(self, tx: Tx) -> None:  # noqa: B027 - a hook: most adapters need nothing here
        """Before the schema is read: what the dialect needs (PostgreSQL: the schema and a lock)."""

    async def _attach(self, thread_id: str, subscriber: Subscriber) -> None:
        """Register a live tail; returns once the feed delivers the thread's events to it."""
        self._followers.add(thread_id, subscriber)

    def _detach(self, thread_id: str, subscriber: Subscriber) -> None:
        self._followers.discard(thread_id, subscriber)

    # -- running calls ------------------------------------------------------------------------------

    async def _run(self, work: Work[T], *, mode: Mode = "autocommit", thread_id: str | None = None) -> T:
        """Run one call; a ``guarded`` one again while its guard finds ``thread_id`` changed.

        The cached row of ``thread_id`` is dropped whenever the call fails (its writes may not
        have landed, or landed without a reply).
        """
        if not self._ready:
            await self._migrate()
        for _ in range(_TRIES):
            try:
                return await self._transact(work, mode=mode)
            except _Conflict:
                if thread_id is not None:
                    self._states.discard(thread_id)
            except BaseException:
                if thread_id is not None:
                    self._states.discard(thread_id)
                raise
        raise StoreUnavailableError(f"{self._where}: thread {thread_id!r} kept changing during {_TRIES} tries")

    async def _migrate(self) -> None:
        async with self._migrating:
            if not self._ready:
                await self._transact(self._migrate_in, mode="locked")
                self._ready = True

    async def _migrate_in(self, tx: Tx) -> None:
        await self._prepare(tx)
        await tx.execute(META)
        row = await tx.fetchrow("SELECT value FROM meta WHERE name = 'schema_version'")
        for version in check_version(int(row[0]) if row is not None else 0, where=self._where):
            for statement in migration(self.dialect, version):
                await tx.execute(statement)
            await tx.execute(
                "INSERT INTO meta (name, value) VALUES ('schema_version', $1) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                str(version),
            )

    async def _swept(self) -> None:
        """Delete expired rows when the sweep interval has passed (called beside expiring writes)."""
        now = time.time()
        if now >= self._next_sweep:
            self._next_sweep = now + self._sweep_interval
            await self._run(lambda tx: state.sweep(tx, now))

    # -- threads, runs, journal, history -----------------------------------------------------------

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread, or ``None``."""
        return await self._run(lambda tx: log.get_thread(tx, thread_id))

    async def begin_run(
        self,
        run: RunRecord,
        *,
        thread: ThreadRecord,
        batch: Batch,
        lease_owner: str,
        lease_ttl: float,
        history_limit: int | None = None,
        dequeue: str | None = None,
    ) -> Begun:
        """Start ``run`` atomically and apply ``batch``, answering its events and the history.

        The head of the thread's queue is read with its row (the same read); ``dequeue`` deletes
        it in the same guarded write.

        Raises:
            ThreadForbiddenError: The thread exists and belongs to someone else.
            ThreadBusyError: Another run is running on the thread, or (without ``dequeue``)
                messages wait in its queue.
            ThreadParkedError: A run on the thread waits for an approval (nothing was written).
            QueuedMessageNotFoundError: ``dequeue`` is not the head of the queue (nothing was written).
        """
        _name_write(batch)
        # A thread this store never wrote is most often a new conversation: where reads are
        # round trips, the first try creates it unread (one round trip); when it was there, the
        # try wrote nothing and the next one reads it.
        tries = 0

        async def begin(tx: Tx) -> Begun:
            nonlocal tries
            tries += 1
            unknown = (
                tries == 1
                and dequeue is None  # a queued message's thread exists
                and self.reads_are_round_trips
                and self._states.get(thread.thread_id) is None
            )
            return await log.begin_run(
                tx,
                run,
                thread=thread,
                batch=batch,
                lease_owner=lease_owner,
                lease_ttl=lease_ttl,
                history_limit=history_limit,
                states=self._states,
                assume_new=unknown,
                dequeue=dequeue,
            )

        return await self._run(begin, mode="guarded", thread_id=thread.thread_id)

    async def ensure_thread(self, thread: ThreadRecord) -> ThreadRecord:
        """Create ``thread`` unless a thread of that id exists; answer the stored one."""
        return await self._run(lambda tx: log.ensure_thread(tx, thread))

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or ``None``."""
        return await self._run(lambda tx: log.get_run(tx, run_id))

    async def thread_runs(self, thread_id: str) -> list[RunRecord]:
        """The thread's runs, oldest first."""
        return await self._run(lambda tx: log.thread_runs(tx, thread_id))

    async def write(self, thread_id: str, batch: Batch) -> list[RunEvent]:
        """Apply ``batch`` in one transaction and return its events with their ``seq``.

        Raises:
            ThreadNotFoundError: The thread does not exist.
            StoreUnavailableError: The database cannot be reached: write the same batch again
                later, it is applied once.
        """
        _name_write(batch)
        return await self._run(
            lambda tx: log.write(tx, thread_id, batch, self._states), mode="guarded", thread_id=thread_id
        )

    async def read_journal(self, thread_id: str, run_id: str) -> list[Entry]:
        """The run's journal, in order."""
        return await self._run(lambda tx: log.read_journal(tx, thread_id, run_id))

    async def get_messages(self, thread_id: str) -> list[Message]:
        """The thread's history, in order."""
        return await self._run(lambda tx: log.get_messages(tx, thread_id))

    # -- threads as data their owner controls ------------------------------------------------------

    async def list_threads(
        self, owner_key: str, *, before: tuple[float, str] | None = None, limit: int = 20
    ) -> list[ThreadSummary]:
        """The owner's threads, newest activity first; ``before`` is the previous page's last pair."""
        return await self._run(lambda tx: state.list_threads(tx, owner_key, before, limit))

    async def rename_thread(self, thread_id: str, title: str | None) -> bool:
        """Give the thread ``title`` (``None``: back to its first message); ``False`` when no such thread."""
        return await self._run(lambda tx: state.rename_thread(tx, thread_id, title))

    async def delete_thread(self, thread_id: str) -> bool:
        """Erase the thread: messages, events, runs, journals, leases, approvals, its queue and its media."""
        return await self._run(lambda tx: state.delete_thread(tx, thread_id, self._states), mode="locked")

    async def idle_threads(self, before_ts: float, limit: int = 100) -> list[str]:
        """Ids of threads whose last activity is older than ``before_ts``, oldest first."""
        return await self._run(lambda tx: state.idle_threads(tx, before_ts, limit))

    async def thread_approvals(self, thread_id: str) -> list[ApprovalRecord]:
        """Every approval of the thread, settled or pending, oldest first."""
        return await self._run(lambda tx: state.thread_approvals(tx, thread_id))

    # -- the per-thread message queue --------------------------------------------------------------

    async def enqueue_message(self, item: QueuedMessage, *, limit: int, first: bool = False) -> int:
        """Put ``item`` last (``first``: first) in its thread's queue; answer its 1-based position.

        One guarded write: the thread row's version moves with it, so a begin that read the
        queue before it runs again and finds the message.

        Raises:
            ThreadNotFoundError: No such thread.
            QueueFullError: The queue holds ``limit`` messages already (nothing was written).
        """
        return await self._run(
            lambda tx: log.enqueue_message(tx, item, limit=limit, first=first, states=self._states),
            mode="guarded",
            thread_id=item.thread_id,
        )

    async def queued_messages(self, thread_id: str) -> list[QueuedMessage]:
        """The thread's queue, first first."""
        return await self._run(lambda tx: log.queued_messages(tx, thread_id))

    async def get_queued(self, message_id: str) -> QueuedMessage | None:
        """A queued message by id, or ``None``."""
        return await self._run(lambda tx: log.get_queued(tx, message_id))

    async def update_queued(
        self, message_id: str, *, turn: Turn | None = None, first: bool = False
    ) -> QueuedMessage | None:
        """Replace a queued message's ``turn`` and/or move it first; ``None`` when it is gone."""
        return await self._run(
            lambda tx: log.update_queued(tx, message_id, turn=turn, first=first, states=self._states), mode="guarded"
        )

    async def remove_queued(self, message_id: str) -> QueuedMessage | None:
        """Take a message out of its queue; ``None`` when it was not queued."""
        return await self._run(lambda tx: log.remove_queued(tx, message_id))

    async def clear_queue(self, thread_id: str) -> list[QueuedMessage]:
        """Empty the thread's queue; answer what it held, first first."""
        return await self._run(lambda tx: log.clear_queue(tx, thread_id))

    async def queued_threads(self, limit: int = 100) -> list[str]:
        """Ids of threads whose queue holds a message, the longest waiting first."""
        return await self._run(lambda tx: log.queued_threads(tx, limit))

    # -- the event log ------------------------------------------------------------------------------

    async def read_events(self, thread_id: str, after_seq: int = 0, limit: int | None = None) -> list[RunEvent]:
        """Events with ``seq > after_seq``, in order (at most ``limit``)."""
        return await self._run(lambda tx: log.read_events(tx, thread_id, after_seq, limit))

    async def last_seq(self, thread_id: str) -> int:
        """The newest ``seq`` of the thread (0 when empty)."""
        return await self._run(lambda tx: log.last_seq(tx, thread_id))

    def subscribe(self, thread_id: str, after_seq: int = 0) -> AsyncIterator[RunEvent]:
        """The log after ``after_seq``, then live events, without gaps or duplicates.

        Raises:
            StoreUnavailableError: The database cannot be reached to read the log (or listen).
        """
        subscriber = Subscriber()

        async def attach() -> None:
            await self._attach(thread_id, subscriber)

        def detach() -> None:
            self._detach(thread_id, subscriber)

        async def read_after(seq: int, limit: int) -> list[RunEvent]:
            return await self.read_events(thread_id, seq, limit)

        return follow(subscriber, read_after, after_seq, attach=attach, detach=detach)

    # -- leases -------------------------------------------------------------------------------------

    async def claim_run(self, run_id: str, *, owner: str, ttl: float, expect: frozenset[str]) -> RunRecord | None:
        """Make ``owner`` the run's driver if its status is in ``expect`` and no live lease holds it."""
        return await self._run(
            lambda tx: log.claim_run(tx, run_id, owner=owner, ttl=ttl, expect=expect, states=self._states),
            mode="locked",
        )

    async def renew_lease(self, thread_id: str, run_id: str, *, owner: str, ttl: float) -> bool:
        """Extend the lease; ``False`` when ``owner`` no longer holds it (or it lapsed)."""
        return await self._run(lambda tx: log.renew_lease(tx, thread_id, run_id, owner=owner, ttl=ttl))

    async def expired_leases(self, limit: int = 100) -> list[tuple[str, str]]:
        """``(thread_id, run_id)`` of running runs whose driver stopped renewing its lease."""
        return await self._run(lambda tx: log.expired_leases(tx, limit))

    # -- approvals ---------------------------------------------------------------------------------

    async def get_approval(self, tool_call_id: str) -> ApprovalRecord | None:
        """The approval, or ``None``."""
        return await self._run(lambda tx: state.get_approval(tx, tool_call_id))

    async def settle_approval(
        self,
        tool_call_id: str,
        *,
        status: ApprovalState,
        decided_by: str | None,
        via: str | None,
        reason: str | None = None,
        remember: bool = False,
    ) -> ApprovalRecord | None:
        """Settle a pending approval atomically; ``None`` when it is not pending (any more)."""
        return await self._run(
            lambda tx: state.settle_approval(
                tx, tool_call_id, status=status, decided_by=decided_by, via=via, reason=reason, remember=remember
            ),
            mode="locked",
        )

    async def pending_approvals(self, thread_id: str) -> list[ApprovalRecord]:
        """The thread's pending approvals, oldest first."""
        return await self._run(lambda tx: state.pending_approvals(tx, thread_id))

    async def open_approvals(
        self, *, before: tuple[float, str] | None = None, limit: int = 100
    ) -> list[ApprovalRecord]:
        """Pending approvals of every thread, newest ``(requested_ts, tool_call_id)`` first, after ``before``."""
        return await self._run(lambda tx: state.open_approvals(tx, before, limit))

    async def recent_runs(self, *, limit: int = 50) -> list[RunRecord]:
        """The newest runs of every thread, newest first."""
        return await self._run(lambda tx: state.recent_runs(tx, limit))

    async def expired_approvals(self, now: float, limit: int = 100) -> list[ApprovalRecord]:
        """Pending approvals past their expiry."""
        return await self._run(lambda tx: state.expired_approvals(tx, now, limit))

    async def is_remembered(self, thread_id: str, tool: str) -> bool:
        """Whether calls of ``tool`` in the thread are approved without asking."""
        return await self._run(lambda tx: state.is_remembered(tx, thread_id, tool))

    # -- confirm tokens -----------------------------------------------------------------------------

    async def claim_confirm_token(self, token_hash: str, expires_at: float) -> bool:
        """Claim a confirm token once."""
        await self._swept()
        return await self._run(lambda tx: state.claim_confirm_token(tx, token_hash, expires_at))

    async def release_confirm_token(self, token_hash: str) -> None:
        """Undo a claim."""
        await self._run(lambda tx: state.release_confirm_token(tx, token_hash))

    # -- channel state ------------------------------------------------------------------------------

    async def channel_get(self, key: str) -> Any:
        """A channel's JSON value, or ``None``."""
        return await self._run(lambda tx: state.channel_get(tx, key))

    async def channel_set(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        """Store a channel's JSON value, optionally expiring after ``ttl`` seconds."""
        await self._swept()
        await self._run(lambda tx: state.channel_set(tx, key, value, ttl))

    async def channel_claim(self, key: str, *, ttl: float, value: Any = True) -> bool:
        """Set ``key`` only if absent (claim-once); True if claimed."""
        await self._swept()
        return await self._run(lambda tx: state.channel_claim(tx, key, ttl, value))

    async def channel_delete(self, key: str) -> None:
        """Drop a key."""
        await self._run(lambda tx: state.channel_delete(tx, key))

    async def channel_delete_if(self, key: str, expected: Any) -> bool:
        """Drop ``key`` only while it holds ``expected``, atomically."""
        return await self._run(lambda tx: state.channel_delete_if(tx, key, expected))

    async def channel_renew_if(self, key: str, expected: Any, *, ttl: float) -> bool:
        """Give ``key`` a new ``ttl`` only while it holds ``expected``, atomically."""
        return await self._run(lambda tx: state.channel_renew_if(tx, key, expected, ttl))

    # -- usage ledger and rate limits (``_sql_usage``) -----------------------------------------------

    async def add_usage(self, entry: UsageEntry) -> UsageTotals:
        """Add one step to its actor's ledger line and day and month totals, in one transaction."""
        await self._swept()
        return await self._run(lambda tx: usage.add_usage(tx, entry), mode="locked")

    async def usage_totals(self, actor_key: str, day: str) -> UsageTotals:
        """The actor's tokens on ``day`` and in its month."""
        return await self._run(lambda tx: usage.usage_totals(tx, actor_key, day))

    async def usage_rows(
        self, *, start: str, end: str, actor_key: str | None = None, limit: int = 1000
    ) -> list[UsageRow]:
        """Ledger lines within ``start..end`` (at most 366 days), ordered."""
        return await self._run(lambda tx: usage.usage_rows(tx, start, end, actor_key, limit))

    async def take_token(self, key: str, *, rate: float, burst: float, now: float) -> float:
        """Take a token from ``key``'s bucket (one locked transaction); ``0.0``, or the seconds to wait."""
        check_bucket(rate, burst, now)
        await self._swept()
        return await self._run(lambda tx: usage.take_token(tx, key, rate, burst, now), mode="locked")

    # -- media and renders in the same database -----------------------------------------------------

    def media_backend(self) -> SqlMediaBackend:
        """A ``renderers.MediaBackend`` keeping media in this store's database, each until it expires.

        Every process sharing the database serves them; erasing a thread erases the media put
        with its ``thread_id``.
        """
        from ._sql_caches import SqlMediaBackend

        return SqlMediaBackend(self._run, swept=self._swept)

    def render_cache(self, *, ttl: float = 86_400, max_item_bytes: int = 8 * 1024 * 1024) -> SqlRenderCache:
        """A ``renderers.RenderCache`` in this store's database, each render kept ``ttl`` seconds."""
        from ._sql_caches import SqlRenderCache

        return SqlRenderCache(self._run, swept=self._swept, ttl=ttl, max_item_bytes=max_item_bytes)

    # -- lifecycle ----------------------------------------------------------------------------------

    async def ping(self) -> None:
        """Check that the database answers, creating or migrating the schema on first use.

        Raises:
            StoreUnavailableError: It cannot be reached.
            UserError: Its schema is newer than this agora-gateway knows.
        """
        await self._run(lambda tx: tx.fetchrow("SELECT 1"))
