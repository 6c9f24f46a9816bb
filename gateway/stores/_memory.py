"""``MemoryStore``: the store of one process (the embedded default)."""

from __future__ import annotations

import asyncio
import copy
import functools
import time
from collections import OrderedDict, defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .._errors import (
    QueuedMessageNotFoundError,
    QueueFullError,
    ThreadBusyError,
    ThreadForbiddenError,
    ThreadNotFoundError,
    ThreadParkedError,
)
from ..events import RunEvent, Turn, now_iso
from ..models import AssistantMessage, ToolMessage, UserMessage
from ._records import (
    TITLE_CHARS,
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
from ._tail import Subscriber, follow
from ._usage import MEMORY_USAGE_WRITES, USAGE_WRITE_DAYS, check_bucket, usage_days

__all__ = ["MemoryStore"]

_PURGE_EVERY = 1024
"""Channel-state writes between two sweeps of expired keys."""
_MAX_BUCKETS = 100_000
"""Rate-limit buckets kept at most; the idlest go first."""

Entry = ModelStepEntry | ToolSettledEntry | PreflightEntry
Message = UserMessage | AssistantMessage | ToolMessage


@dataclass(kw_only=True)
class _Thread:
    record: ThreadRecord
    events: list[RunEvent] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    running: str | None = None
    remembered: set[str] = field(default_factory=set)
    pending: set[str] = field(default_factory=set)
    """Tool call ids of the thread's pending approvals."""
    approvals: dict[str, None] = field(default_factory=dict)
    """Tool call ids of all the thread's approvals, oldest first."""
    subscribers: set[Subscriber] = field(default_factory=set)
    active: float = field(default_factory=lambda: time.time())  # looked up when called: a test may fix the clock
    """When the thread was last written to (a turn begun, an event written), UNIX seconds."""
    title: str | None = None
    """The name its owner gave it, if any."""
    queue: list[QueuedMessage] = field(default_factory=list)
    """Messages waiting for the active run to end, first first."""

    def summary(self) -> ThreadSummary:
        first = next((m.content for m in self.messages if isinstance(m, UserMessage)), None)
        return ThreadSummary(
            thread_id=self.record.thread_id,
            title=self.title if self.title is not None else (first[:TITLE_CHARS] if first else None),
            channel=self.record.channel,
            created_at=self.record.created_at,
            last_activity=datetime.fromtimestamp(self.active, UTC).isoformat(timespec="milliseconds"),
            last_activity_ts=self.active,
        )


class MemoryStore:
    """Keeps everything in this process's memory; nothing survives a restart.

    Records are values: readers get (shallow) copies of run records and approvals, since their
    owners replace fields; events, journal entries and messages never change once written, so
    they are shared as they are.

    Memory stays bounded: beyond ``max_threads`` threads, the least recently active idle ones
    (no run running, nothing waiting for approval, nobody following) are forgotten with their
    runs, journals and approvals. Use ``RedisStore`` to keep conversations for good.
    """

    def __init__(self, *, max_threads: int = 10_000) -> None:
        """Args: max_threads: threads kept before the least recently active idle ones go."""
        if max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        self.max_threads = max_threads
        self._threads: OrderedDict[str, _Thread] = OrderedDict()
        self._runs: dict[str, RunRecord] = {}
        self._journals: dict[str, list[Entry]] = defaultdict(list)
        self._leases: dict[str, tuple[str, float]] = {}
        self._approvals: dict[str, ApprovalRecord] = {}
        self._tokens: dict[str, float] = {}
        self._channel: dict[str, tuple[Any, float | None]] = {}
        self._usage: dict[tuple[str, str, str, str], UsageRow] = {}
        self._usage_totals: dict[tuple[str, str], int] = {}
        self._usage_writes: OrderedDict[tuple[str, str], float] = OrderedDict()
        """When each (actor key, write id) was added, oldest first (``add_usage`` adds it once)."""
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._channel_writes = 0
        self._waiting_subscribers: dict[str, set[Subscriber]] = defaultdict(set)
        self._owned: dict[str, set[str]] = defaultdict(set)
        """Thread ids by their owner's key (``list_threads``)."""
        self._queued: dict[str, str] = {}
        """Thread ids of queued messages, by message id."""

    # -- threads, runs, journal, history -----------------------------------------------------------

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread, or ``None``."""
        thread = self._threads.get(thread_id)
        return thread.record.model_copy() if thread else None

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
        """Start ``run`` atomically and apply ``batch`` (the first queued message's turn with ``dequeue``)."""
        state = self._threads.get(thread.thread_id)
        if state is None:
            state = self._create(thread)
        else:
            self._threads.move_to_end(thread.thread_id)
        if state.record.owner_key != thread.owner_key:
            raise ThreadForbiddenError(f"Thread {thread.thread_id!r} belongs to another actor")
        if state.running is not None:
            raise ThreadBusyError(f"A run is already running on thread {thread.thread_id!r}")
        if state.pending:
            raise ThreadParkedError(f"A run on thread {thread.thread_id!r} waits for an approval")
        if dequeue is None:
            if state.queue:
                raise ThreadBusyError(f"Messages wait in the queue of thread {thread.thread_id!r}")
        else:
            if not state.queue or state.queue[0].message_id != dequeue:
                raise QueuedMessageNotFoundError(f"{dequeue!r} is not the first queued message any more")
            del self._queued[state.queue.pop(0).message_id]
        state.running = run.run_id
        state.runs.append(run.run_id)
        state.active = time.time()
        run.first_seq = len(state.events) + 1
        run.status = "running"
        self._leases[run.run_id] = (lease_owner, time.time() + lease_ttl)
        batch.run = run
        events = self._apply(state, batch)
        history = state.messages[-history_limit:] if history_limit is not None else list(state.messages)
        return Begun(events=events, history=history)

    def _create(self, thread: ThreadRecord) -> _Thread:
        state = _Thread(record=thread.model_copy())
        state.subscribers = self._waiting_subscribers.pop(thread.thread_id, set())
        self._threads[thread.thread_id] = state
        self._owned[thread.owner_key].add(thread.thread_id)
        if len(self._threads) > self.max_threads:
            self._evict()
        return state

    def _evict(self) -> None:
        """Forget the least recently active idle threads until ``max_threads`` remain."""
        excess = len(self._threads) - self.max_threads
        # Oldest first, stopping at the last one needed: a turn on a full store walks past the
        # busy threads at the front, not through every thread id.
        idle: list[str] = []
        for thread_id, state in self._threads.items():
            if len(idle) >= excess:
                break
            if state.running is None and not state.pending and not state.subscribers and not state.queue:
                idle.append(thread_id)
        for thread_id in idle:
            self._forget(thread_id)

    def _forget(self, thread_id: str) -> _Thread:
        """Drop the thread with its runs, journals, leases and approvals; answer what it was."""
        state = self._threads.pop(thread_id)
        owned = self._owned.get(state.record.owner_key)
        if owned is not None:
            owned.discard(thread_id)
            if not owned:
                del self._owned[state.record.owner_key]
        for run_id in state.runs:
            self._runs.pop(run_id, None)
            self._journals.pop(run_id, None)
            self._leases.pop(run_id, None)
        for call_id in state.approvals:
            self._approvals.pop(call_id, None)
        for item in state.queue:
            self._queued.pop(item.message_id, None)
        return state

    async def ensure_thread(self, thread: ThreadRecord) -> ThreadRecord:
        """Create ``thread`` unless it exists; answer the stored one."""
        state = self._threads.get(thread.thread_id)
        if state is None:
            state = self._create(thread)
        return state.record.model_copy()

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or ``None``."""
        run = self._runs.get(run_id)
        return run.model_copy() if run else None

    async def thread_runs(self, thread_id: str) -> list[RunRecord]:
        """The thread's runs, oldest first."""
        state = self._threads.get(thread_id)
        return [self._runs[r].model_copy() for r in state.runs] if state else []

    async def write(self, thread_id: str, batch: Batch) -> list[RunEvent]:
        """Apply ``batch`` atomically."""
        state = self._threads.get(thread_id)
        if state is None:
            raise ThreadNotFoundError(f"no thread {thread_id!r}")
        return self._apply(state, batch)

    def _apply(self, state: _Thread, batch: Batch) -> list[RunEvent]:
        written: list[RunEvent] = []
        for event in batch.events:
            event.seq = len(state.events) + 1  # events are the writer's own, fresh objects
            state.events.append(event)
            written.append(event)
        if written:
            state.active = time.time()
        if batch.run is not None:
            # The writer's own record is kept, not a copy: it writes every change it makes (a
            # write has no await before this point, so readers never see a half-made step), and
            # readers get copies.
            run = batch.run
            self._runs[run.run_id] = run
            if batch.journal:
                self._journals[run.run_id].extend(batch.journal)
            if batch.release:
                if state.running == run.run_id:
                    state.running = None
                self._leases.pop(run.run_id, None)
        state.messages.extend(batch.messages)
        for approval in batch.approvals:
            self._approvals[approval.tool_call_id] = approval.model_copy()
            state.approvals[approval.tool_call_id] = None
            if approval.status == "pending":
                state.pending.add(approval.tool_call_id)
        for subscriber in state.subscribers:
            for event in written:
                subscriber.push(event)
        return written

    async def read_journal(self, thread_id: str, run_id: str) -> list[Entry]:
        """The run's journal, in order."""
        return list(self._journals.get(run_id, []))

    async def get_messages(self, thread_id: str) -> list[Message]:
        """The thread's history, in order."""
        state = self._threads.get(thread_id)
        return list(state.messages) if state else []

    # -- threads as data their owner controls ------------------------------------------------------

    async def list_threads(
        self, owner_key: str, *, before: tuple[float, str] | None = None, limit: int = 20
    ) -> list[ThreadSummary]:
        """The owner's threads, newest activity first, after ``before`` (a previous page's last pair)."""
        if limit <= 0:
            return []
        lines = sorted(((self._threads[t].active, t) for t in self._owned.get(owner_key, ())), reverse=True)
        if before is not None:
            lines = [line for line in lines if line < before]
        return [self._threads[thread_id].summary() for _, thread_id in lines[:limit]]

    async def rename_thread(self, thread_id: str, title: str | None) -> bool:
        """Give the thread ``title`` (``None``: its first message again)."""
        state = self._threads.get(thread_id)
        if state is None:
            return False
        state.title = title
        return True

    async def delete_thread(self, thread_id: str) -> bool:
        """Erase the thread with its runs, journals, leases, approvals and remembered tools.

        Its live tails stay attached to the id: a thread created again under it reaches them.
        """
        if thread_id not in self._threads:
            return False
        state = self._forget(thread_id)
        if state.subscribers:
            self._waiting_subscribers[thread_id].update(state.subscribers)
        return True

    async def idle_threads(self, before_ts: float, limit: int = 100) -> list[str]:
        """Ids of threads last written to before ``before_ts``, oldest first."""
        idle = sorted(
            (state.active, thread_id) for thread_id, state in self._threads.items() if state.active < before_ts
        )
        return [thread_id for _, thread_id in idle[: max(limit, 0)]]

    async def thread_approvals(self, thread_id: str) -> list[ApprovalRecord]:
        """Every approval of the thread, settled or pending, oldest first."""
        state = self._threads.get(thread_id)
        if state is None:
            return []
        return [self._approvals[call_id].model_copy() for call_id in state.approvals if call_id in self._approvals]

    # -- the per-thread message queue --------------------------------------------------------------

    async def enqueue_message(self, item: QueuedMessage, *, limit: int, first: bool = False) -> int:
        """Put ``item`` last (or first) in its thread's queue; answer its 1-based position."""
        state = self._threads.get(item.thread_id)
        if state is None:
            raise ThreadNotFoundError(f"no thread {item.thread_id!r}")
        if len(state.queue) >= limit:
            raise QueueFullError(f"The queue of this conversation holds {limit} messages already")
        stored = item.model_copy()
        if first:
            state.queue.insert(0, stored)
        else:
            state.queue.append(stored)
        self._queued[item.message_id] = item.thread_id
        return 1 if first else len(state.queue)

    async def queued_messages(self, thread_id: str) -> list[QueuedMessage]:
        """The thread's queue, first first."""
        state = self._threads.get(thread_id)
        return [item.model_copy() for item in state.queue] if state else []

    def _find_queued(self, message_id: str) -> tuple[_Thread, int] | None:
        thread_id = self._queued.get(message_id)
        state = self._threads.get(thread_id) if thread_id is not None else None
        if state is None:
            return None
        for index, item in enumerate(state.queue):
            if item.message_id == message_id:
                return state, index
        return None  # pragma: no cover - the index and the queues change together

    async def get_queued(self, message_id: str) -> QueuedMessage | None:
        """A queued message by id, or ``None``."""
        found = self._find_queued(message_id)
        return found[0].queue[found[1]].model_copy() if found else None

    async def update_queued(
        self, message_id: str, *, turn: Turn | None = None, first: bool = False
    ) -> QueuedMessage | None:
        """Replace a queued message's turn and/or move it first."""
        found = self._find_queued(message_id)
        if found is None:
            return None
        state, index = found
        item = state.queue[index]
        if turn is not None:
            item = item.model_copy(update={"turn": turn})
            state.queue[index] = item
        if first and index:
            state.queue.insert(0, state.queue.pop(index))
        return item.model_copy()

    async def remove_queued(self, message_id: str) -> QueuedMessage | None:
        """Take a message out of its queue."""
        found = self._find_queued(message_id)
        if found is None:
            return None
        state, index = found
        del self._queued[message_id]
        return state.queue.pop(index)

    async def clear_queue(self, thread_id: str) -> list[QueuedMessage]:
        """Empty the thread's queue."""
        state = self._threads.get(thread_id)
        if state is None:
            return []
        held, state.queue = state.queue, []
        for item in held:
            self._queued.pop(item.message_id, None)
        return held

    async def queued_threads(self, limit: int = 100) -> list[str]:
        """Ids of idle threads (no run running, none parked) whose queue holds a message."""
        idle: list[str] = []
        for thread_id in dict.fromkeys(self._queued.values()):
            state = self._threads.get(thread_id)
            if state is not None and state.running is None and not state.pending:
                idle.append(thread_id)
        return idle[: max(limit, 0)]

    # -- the event log ------------------------------------------------------------------------------

    async def read_events(self, thread_id: str, after_seq: int = 0, limit: int | None = None) -> list[RunEvent]:
        """Events with ``seq > after_seq``."""
        state = self._threads.get(thread_id)
        if state is None:
            return []
        start = max(after_seq, 0)
        # One slice of what is asked: a page of a long log copies the page, not the whole tail.
        return state.events[start : start + max(limit, 0)] if limit is not None else state.events[start:]

    async def last_seq(self, thread_id: str) -> int:
        """The newest ``seq`` of the thread."""
        state = self._threads.get(thread_id)
        return len(state.events) if state else 0

    def subscribe(self, thread_id: str, after_seq: int = 0) -> AsyncIterator[RunEvent]:
        """The log after ``after_seq``, then live events."""
        subscriber = Subscriber()

        async def attach() -> None:
            state = self._threads.get(thread_id)
            (state.subscribers if state else self._waiting_subscribers[thread_id]).add(subscriber)

        def detach() -> None:
            current = self._threads.get(thread_id)
            if current is not None:
                current.subscribers.discard(subscriber)
            waiting = self._waiting_subscribers.get(thread_id)
            if waiting is not None:
                waiting.discard(subscriber)
                if not waiting:
                    del self._waiting_subscribers[thread_id]

        return follow(
            subscriber, functools.partial(self.read_events, thread_id), after_seq, attach=attach, detach=detach
        )

    # -- leases -------------------------------------------------------------------------------------

    async def claim_run(self, run_id: str, *, owner: str, ttl: float, expect: frozenset[str]) -> RunRecord | None:
        """Make ``owner`` the run's driver if its status is in ``expect`` and no live lease holds it."""
        run = self._runs.get(run_id)
        if run is None or run.status not in expect:
            return None
        lease = self._leases.get(run_id)
        if lease is not None and lease[1] > time.time() and lease[0] != owner:
            return None
        state = self._threads[run.thread_id]
        if state.running not in (None, run_id):
            return None
        state.running = run_id
        self._leases[run_id] = (owner, time.time() + ttl)
        run.status = "running"
        run.updated_at = now_iso()
        return run.model_copy()

    async def renew_lease(self, thread_id: str, run_id: str, *, owner: str, ttl: float) -> bool:
        """Extend the lease; ``False`` when ``owner`` no longer holds it (or it lapsed)."""
        lease = self._leases.get(run_id)
        # A lapsed lease is not held any more: another process may be resuming the run (Redis
        # drops the expired lease key, so both stores answer alike).
        if lease is None or lease[0] != owner or lease[1] <= time.time():
            return False
        self._leases[run_id] = (owner, time.time() + ttl)
        return True

    async def expired_leases(self, limit: int = 100) -> list[tuple[str, str]]:
        """Running runs whose driver stopped renewing."""
        now = time.time()
        expired = [
            (self._runs[run_id].thread_id, run_id)
            for run_id, (_, until) in self._leases.items()
            if until <= now and run_id in self._runs and self._runs[run_id].status == "running"
        ]
        return expired[:limit]

    # -- approvals ---------------------------------------------------------------------------------

    async def get_approval(self, tool_call_id: str) -> ApprovalRecord | None:
        """The approval, or ``None``."""
        approval = self._approvals.get(tool_call_id)
        return approval.model_copy() if approval else None

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
        """Settle a pending approval; ``None`` when not pending."""
        approval = self._approvals.get(tool_call_id)
        if approval is None or approval.status != "pending":
            return None
        approval.status = status
        self._threads[approval.thread_id].pending.discard(tool_call_id)
        approval.decided_by = decided_by
        approval.via = via
        approval.reason = reason
        approval.decided_at = now_iso()
        approval.remember = remember
        if remember and status == "approved":
            self._threads[approval.thread_id].remembered.add(approval.tool)
        return approval.model_copy()

    async def pending_approvals(self, thread_id: str) -> list[ApprovalRecord]:
        """The thread's pending approvals, oldest first."""
        return [a.model_copy() for a in self._approvals.values() if a.thread_id == thread_id and a.status == "pending"]

    async def open_approvals(
        self, *, before: tuple[float, str] | None = None, limit: int = 100
    ) -> list[ApprovalRecord]:
        """Pending approvals of every thread, newest ``(requested_ts, tool_call_id)`` first."""
        pending = sorted(
            (a for a in self._approvals.values() if a.status == "pending"),
            key=lambda a: (a.requested_ts, a.tool_call_id),
            reverse=True,
        )
        if before is not None:
            pending = [a for a in pending if (a.requested_ts, a.tool_call_id) < before]
        return [a.model_copy() for a in pending[: max(limit, 0)]]

    async def recent_runs(self, *, limit: int = 50) -> list[RunRecord]:
        """The newest runs of every thread, newest first."""
        runs = sorted(self._runs.values(), key=lambda r: (r.created_at, r.run_id), reverse=True)
        return [r.model_copy() for r in runs[: max(limit, 0)]]

    async def expired_approvals(self, now: float, limit: int = 100) -> list[ApprovalRecord]:
        """Pending approvals past their expiry."""
        lapsed = [a for a in self._approvals.values() if a.status == "pending" and a.expires_ts <= now]
        return [a.model_copy() for a in lapsed[:limit]]

    async def is_remembered(self, thread_id: str, tool: str) -> bool:
        """Whether calls of ``tool`` in the thread are approved without asking."""
        state = self._threads.get(thread_id)
        return state is not None and tool in state.remembered

    # -- confirm tokens -----------------------------------------------------------------------------

    async def claim_confirm_token(self, token_hash: str, expires_at: float) -> bool:
        """Claim a confirm token once."""
        now = time.time()
        if len(self._tokens) > 4096:
            self._tokens = {h: exp for h, exp in self._tokens.items() if exp > now}
        if token_hash in self._tokens:
            return False
        self._tokens[token_hash] = expires_at
        return True

    async def release_confirm_token(self, token_hash: str) -> None:
        """Undo a claim."""
        self._tokens.pop(token_hash, None)

    # -- channel state ------------------------------------------------------------------------------

    def _live(self, key: str) -> tuple[Any, float | None] | None:
        item = self._channel.get(key)
        if item is not None and item[1] is not None and item[1] <= time.time():
            del self._channel[key]
            return None
        return item

    async def channel_get(self, key: str) -> Any:
        """A channel's JSON value, or ``None``."""
        item = self._live(key)
        return copy.deepcopy(item[0]) if item else None

    def _put(self, key: str, value: Any, expires: float | None) -> None:
        self._channel[key] = (copy.deepcopy(value), expires)
        self._channel_writes += 1
        if self._channel_writes % _PURGE_EVERY == 0:
            # Keys written once and never read again (message ids, delivery records) expire
            # here, not only when read: memory stays bounded by what is still alive.
            now = time.time()
            for stale in [k for k, (_, until) in self._channel.items() if until is not None and until <= now]:
                del self._channel[stale]

    async def channel_set(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        """Store a channel's JSON value."""
        self._put(key, value, time.time() + ttl if ttl is not None else None)

    async def channel_claim(self, key: str, *, ttl: float, value: Any = True) -> bool:
        """Set ``key`` only if absent."""
        if self._live(key) is not None:
            return False
        self._put(key, value, time.time() + ttl)
        return True

    async def channel_delete(self, key: str) -> None:
        """Drop a key."""
        self._channel.pop(key, None)

    async def channel_delete_if(self, key: str, expected: Any) -> bool:
        """Drop ``key`` only while it holds ``expected``."""
        item = self._live(key)
        if item is None or item[0] != expected:
            return False
        del self._channel[key]
        return True

    async def channel_renew_if(self, key: str, expected: Any, *, ttl: float) -> bool:
        """Give ``key`` a new ``ttl`` only while it holds ``expected``."""
        item = self._live(key)
        if item is None or item[0] != expected:
            return False
        self._channel[key] = (item[0], time.time() + ttl)
        return True

    # -- usage ledger and rate limits ----------------------------------------------------------------

    async def add_usage(self, entry: UsageEntry) -> UsageTotals:
        """Add one step to its actor's ledger line and totals, once per write id."""
        if entry.write_id is not None:
            now = time.time()
            writes = self._usage_writes
            while writes and (
                len(writes) >= MEMORY_USAGE_WRITES or next(iter(writes.values())) <= now - USAGE_WRITE_DAYS * 86_400
            ):
                writes.popitem(last=False)
            if (entry.actor_key, entry.write_id) in writes:
                return await self.usage_totals(entry.actor_key, entry.day)
            writes[(entry.actor_key, entry.write_id)] = now
        key = (entry.day, entry.actor_key, entry.agent, entry.model)
        row = self._usage.get(key)
        if row is None:
            row = self._usage[key] = UsageRow(
                day=entry.day, actor_key=entry.actor_key, agent=entry.agent, model=entry.model
            )
        row.input_tokens += entry.input_tokens
        row.output_tokens += entry.output_tokens
        row.steps += 1
        if entry.cost_usd is None:
            row.unpriced_steps += 1
        else:
            row.cost_usd = (row.cost_usd or 0.0) + entry.cost_usd
        tokens = entry.input_tokens + entry.output_tokens
        day_key, month_key = (entry.actor_key, entry.day), (entry.actor_key, entry.day[:7])
        self._usage_totals[day_key] = self._usage_totals.get(day_key, 0) + tokens
        self._usage_totals[month_key] = self._usage_totals.get(month_key, 0) + tokens
        return UsageTotals(day_tokens=self._usage_totals[day_key], month_tokens=self._usage_totals[month_key])

    async def usage_totals(self, actor_key: str, day: str) -> UsageTotals:
        """The actor's tokens on ``day`` and in its month."""
        return UsageTotals(
            day_tokens=self._usage_totals.get((actor_key, day), 0),
            month_tokens=self._usage_totals.get((actor_key, day[:7]), 0),
        )

    async def usage_rows(
        self, *, start: str, end: str, actor_key: str | None = None, limit: int = 1000
    ) -> list[UsageRow]:
        """Ledger lines within ``start..end`` (at most ``MAX_USAGE_DAYS``), ordered.

        Raises:
            ValueError: A bound is no day, or the range spans more than ``MAX_USAGE_DAYS``.
        """
        usage_days(start, end)
        rows = [
            row.model_copy()
            for key, row in sorted(self._usage.items())
            if start <= key[0] <= end and (actor_key is None or key[1] == actor_key)
        ]
        return rows[: max(0, limit)]

    async def take_token(self, key: str, *, rate: float, burst: float, now: float) -> float:
        """Take a token from ``key``'s bucket (this process is the only one sharing it)."""
        check_bucket(rate, burst, now)
        tokens, last = self._buckets.pop(key, (burst, now))
        tokens = min(burst, tokens + max(0.0, now - last) * rate)
        wait = 0.0 if tokens >= 1.0 else ((1.0 - tokens) / rate if rate > 0 else 60.0)
        self._buckets[key] = (tokens - 1.0 if wait == 0.0 else tokens, max(now, last))  # never refill backwards
        while len(self._buckets) > _MAX_BUCKETS:
            self._buckets.popitem(last=False)
        return wait

    # -- lifecycle ----------------------------------------------------------------------------------

    async def ping(self) -> None:
        """Always reachable."""

    async def aclose(self) -> None:
        """Nothing to release."""
        await asyncio.sleep(0)
