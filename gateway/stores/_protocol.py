"""The ``Store`` protocol: everything that must outlive a process lives behind it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, runtime_checkable

from ..events import RunEvent, Turn
from ..models import AssistantMessage, ToolMessage, UserMessage
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

__all__ = ["Store"]


@runtime_checkable
class Store(Protocol):
    """Where everything durable lives.

    Threads, messages, runs and their journal, the event log, approvals, confirm tokens and
    channel state. A run's state is always here: a parked run is only data, so any process sharing the store
    can resume it. ``MemoryStore`` serves one process; ``RedisStore`` many.
    """

    # -- threads, runs, journal, history -----------------------------------------------------------

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread, or ``None``."""
        ...

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
        """Start ``run`` atomically and apply ``batch`` (its user message and first events).

        Creates ``thread`` if it does not exist, takes the thread's running slot and the run's
        lease, sets ``run.first_seq``. Answers the events with their ``seq`` and the thread's
        history (the new message included; only the newest ``history_limit`` messages when
        given), so a turn starts in one round trip.

        The thread's queue keeps its order: without ``dequeue``, a thread whose queue holds a
        message is busy (the new message queues behind). With ``dequeue`` (a queued message's
        id) the run is that message's turn: it must be the first of the queue, and leaves it in
        the same atomic step. Checked in this order: owner, running, parked, queue.

        Raises:
            ThreadForbiddenError: The thread exists and belongs to someone else.
            ThreadBusyError: Another run is running on the thread, or (without ``dequeue``) its
                queue is not empty.
            ThreadParkedError: A run on the thread waits for an approval (nothing was written).
            QueuedMessageNotFoundError: ``dequeue`` is not the first message of the queue any
                more (removed, or another process started it); nothing was written.
        """
        ...

    async def ensure_thread(self, thread: ThreadRecord) -> ThreadRecord:
        """Create ``thread`` unless a thread of that id exists; answer the stored one.

        A channel reserves an id this way before anyone follows it, so whoever creates it later
        can only be its owner.
        """
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or ``None``."""
        ...

    async def thread_runs(self, thread_id: str) -> list[RunRecord]:
        """The thread's runs, oldest first."""
        ...

    async def write(self, thread_id: str, batch: Batch) -> list[RunEvent]:
        """Apply ``batch`` atomically and return its events with their ``seq``.

        The events are the writer's own fresh objects: a store may set ``seq`` on them in place
        (``MemoryStore`` does, and returns them) or return copies (``RedisStore``).

        Raises:
            ThreadNotFoundError: The thread does not exist.
            StoreUnavailableError: The store cannot be reached.
        """
        ...

    async def read_journal(
        self, thread_id: str, run_id: str
    ) -> list[ModelStepEntry | ToolSettledEntry | PreflightEntry]:
        """The run's journal, in order."""
        ...

    async def get_messages(self, thread_id: str) -> list[UserMessage | AssistantMessage | ToolMessage]:
        """The thread's history, in order."""
        ...

    # -- threads as data their owner controls ------------------------------------------------------

    async def list_threads(
        self, owner_key: str, *, before: tuple[float, str] | None = None, limit: int = 20
    ) -> list[ThreadSummary]:
        """The threads of the owner whose ``Actor.key`` is ``owner_key``, newest activity first.

        Ordered by ``(last_activity_ts, thread_id)`` descending; ``before`` (the last line's pair
        of the previous page) answers only the lines after it, so pages never overlap or skip.
        """
        ...

    async def rename_thread(self, thread_id: str, title: str | None) -> bool:
        """Give the thread ``title`` (``None``: back to its first message); ``False`` when no such thread."""
        ...

    async def delete_thread(self, thread_id: str) -> bool:
        """Erase the thread and everything of it.

        Its messages, events, runs and their journals and leases, approvals (and what they
        remember), its queue; channel state is not the thread's.

        The caller cancels a running run first; a write after the erasure finds no thread.
        ``False`` when there was no such thread.
        """
        ...

    async def idle_threads(self, before_ts: float, limit: int = 100) -> list[str]:
        """Ids of threads whose last activity is older than ``before_ts`` (retention), oldest first."""
        ...

    async def thread_approvals(self, thread_id: str) -> list[ApprovalRecord]:
        """Every approval of the thread, settled or pending, oldest first (export)."""
        ...

    # -- the per-thread message queue --------------------------------------------------------------

    async def enqueue_message(self, item: QueuedMessage, *, limit: int, first: bool = False) -> int:
        """Put ``item`` last (``first``: first) in its thread's queue; answer its 1-based position.

        The thread must exist (a message queues behind a run). Its ``message_id`` is new.

        Raises:
            ThreadNotFoundError: No such thread.
            QueueFullError: The queue holds ``limit`` messages already (nothing was written).
        """
        ...

    async def queued_messages(self, thread_id: str) -> list[QueuedMessage]:
        """The thread's queue, first (next to run) first."""
        ...

    async def get_queued(self, message_id: str) -> QueuedMessage | None:
        """A queued message by id (any thread), or ``None`` once it ran or was removed."""
        ...

    async def update_queued(
        self, message_id: str, *, turn: Turn | None = None, first: bool = False
    ) -> QueuedMessage | None:
        """Replace a queued message's ``turn`` (an edit) and/or move it first; ``None`` when it is gone."""
        ...

    async def remove_queued(self, message_id: str) -> QueuedMessage | None:
        """Take a message out of its queue; answer it, or ``None`` when it was not queued."""
        ...

    async def clear_queue(self, thread_id: str) -> list[QueuedMessage]:
        """Empty the thread's queue; answer what it held, first first."""
        ...

    async def queued_threads(self, limit: int = 100) -> list[str]:
        """Ids of idle threads whose queue holds a message: no run running, none parked.

        What a process stopped between a run's end and its drain leaves behind; the sweep starts
        them. Busy threads are not listed, however many there are, so they never hide these.
        """
        ...

    # -- the event log ------------------------------------------------------------------------------

    async def read_events(self, thread_id: str, after_seq: int = 0, limit: int | None = None) -> list[RunEvent]:
        """Events with ``seq > after_seq``, in order (at most ``limit``)."""
        ...

    async def last_seq(self, thread_id: str) -> int:
        """The newest ``seq`` of the thread (0 when empty)."""
        ...

    def subscribe(self, thread_id: str, after_seq: int = 0) -> AsyncIterator[RunEvent]:
        """Follow the thread's events.

        Yields every event with ``seq > after_seq``, then live ones as they are written, without
        gaps or duplicates, until the consumer stops iterating.
        """
        ...

    # -- leases: who drives a running run ---------------------------------------------------------

    async def claim_run(self, run_id: str, *, owner: str, ttl: float, expect: frozenset[str]) -> RunRecord | None:
        """Make ``owner`` the driver of a run.

        Succeeds if its status is in ``expect`` and no live lease holds it: the run becomes
        ``running``, takes the thread's running slot and a lease. ``None`` when the claim fails.
        """
        ...

    async def renew_lease(self, thread_id: str, run_id: str, *, owner: str, ttl: float) -> bool:
        """Extend the lease; ``False`` when ``owner`` no longer holds it."""
        ...

    async def expired_leases(self, limit: int = 100) -> list[tuple[str, str]]:
        """``(thread_id, run_id)`` of running runs whose driver stopped renewing its lease."""
        ...

    # -- approvals ---------------------------------------------------------------------------------

    async def get_approval(self, tool_call_id: str) -> ApprovalRecord | None:
        """The approval, or ``None``."""
        ...

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
        """Settle a pending approval atomically; ``None`` when it is not pending (any more).

        ``remember`` (with ``approved``) makes later calls of the same tool in the thread
        approved without asking.
        """
        ...

    async def pending_approvals(self, thread_id: str) -> list[ApprovalRecord]:
        """The thread's pending approvals, oldest first."""
        ...

    async def open_approvals(
        self, *, before: tuple[float, str] | None = None, limit: int = 100
    ) -> list[ApprovalRecord]:
        """Pending approvals of every thread, newest first.

        Ordered by ``(requested_ts, tool_call_id)`` descending; ``before`` (the last record's pair
        of the previous page) answers only the ones after it. Staff lists and the console filter
        them by who may decide.
        """
        ...

    async def recent_runs(self, *, limit: int = 50) -> list[RunRecord]:
        """The newest runs of every thread, newest ``created_at`` first (the staff console)."""
        ...

    async def expired_approvals(self, now: float, limit: int = 100) -> list[ApprovalRecord]:
        """Pending approvals past their expiry."""
        ...

    async def is_remembered(self, thread_id: str, tool: str) -> bool:
        """Whether calls of ``tool`` in the thread are approved without asking."""
        ...

    # -- confirm tokens (tools.ConfirmTokenStore) ---------------------------------------------------

    async def claim_confirm_token(self, token_hash: str, expires_at: float) -> bool:
        """Claim a confirm token once."""
        ...

    async def release_confirm_token(self, token_hash: str) -> None:
        """Undo a claim."""
        ...

    # -- channel state ----------------------------------------------------------------------------

    async def channel_get(self, key: str) -> Any:
        """A channel's JSON value, or ``None``."""
        ...

    async def channel_set(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        """Store a channel's JSON value, optionally expiring."""
        ...

    async def channel_claim(self, key: str, *, ttl: float, value: Any = True) -> bool:
        """Set ``key`` only if absent (claim-once, e.g. a webhook's message id); True if claimed."""
        ...

    async def channel_delete(self, key: str) -> None:
        """Drop a key."""
        ...

    async def channel_delete_if(self, key: str, expected: Any) -> bool:
        """Drop ``key`` only while it holds ``expected``, atomically (give back a lease we hold)."""
        ...

    async def channel_renew_if(self, key: str, expected: Any, *, ttl: float) -> bool:
        """Give ``key`` a new ``ttl`` only while it holds ``expected``, atomically (renew our lease)."""
        ...

    # -- usage ledger and rate limits -------------------------------------------------------------

    async def add_usage(self, entry: UsageEntry) -> UsageTotals:
        """Add one step to its actor's ledger line and day and month totals, atomically.

        Once per write id: an entry whose ``write_id`` its actor already added (within
        ``USAGE_WRITE_DAYS``, on any process) adds nothing and returns the totals as they are.
        An entry without a write id is added on every call.

        Returns the actor's totals after the addition (every process sees the same counts).
        """
        ...

    async def usage_totals(self, actor_key: str, day: str) -> UsageTotals:
        """The actor's tokens on ``day`` (``YYYY-MM-DD``, UTC) and in its month."""
        ...

    async def usage_rows(
        self, *, start: str, end: str, actor_key: str | None = None, limit: int = 1000
    ) -> list[UsageRow]:
        """Ledger lines with ``start <= day <= end`` (one actor's, or everyone's), at most ``limit``.

        Ordered by day, actor, agent and model (code point order). An ``end`` before ``start``
        reads nothing.

        Raises:
            ValueError: ``start`` or ``end`` is no ``YYYY-MM-DD`` day, or the range spans more
                than ``MAX_USAGE_DAYS`` (366) days.
        """
        ...

    async def take_token(self, key: str, *, rate: float, burst: float, now: float) -> float:
        """Take a token from ``key``'s bucket, atomically across every process sharing the store.

        The bucket holds up to ``burst`` tokens, refilled at ``rate`` per second from ``now``
        (wall-clock seconds, ``time.time()``: every process must agree on it). Returns ``0.0``
        when a token was taken, else the seconds until one is there (nothing taken). An idle
        bucket may be forgotten once it would be full again.
        """
        ...

    # -- lifecycle ---------------------------------------------------------------------------------

    async def ping(self) -> None:
        """Raise ``StoreUnavailableError`` when the store cannot be reached."""
        ...

    async def aclose(self) -> None:
        """Release connections and stop background work."""
        ...
