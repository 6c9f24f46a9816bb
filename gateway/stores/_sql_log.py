"""The SQL stores' logic of threads, runs, the journal, the history, the event log and leases.

Each function is one store call over a ``Tx`` (see ``_sql_tx`` for the modes). The rules:

- ``begin_run`` and ``write`` are ``guarded``: they read the thread's row (or take it from
  ``ThreadStates``, what this store last wrote there), then write, and the first write is the
  thread row's update guarded by the ``version`` they read. Every change of that row gives it a
  new random version, so of two writers of one thread that read the same row, one applies and
  the other runs again on the new row (and a write built on a cached write that never landed
  finds no row of its version): the thread's ``seq`` numbers events without gaps or doubles,
  its ``running`` column is the running slot.
- Writes are idempotent by ``Batch.write_id``: the thread's ``recent`` column keeps its last
  writes' ids with the seq of their first event (``"<id>:<first>;"`` each, the newest
  ``_RECENT`` of them), and a write whose id is there answers its events as first written and
  changes nothing. A driver that lost the reply of its commit (the connection dropped) writes
  the same batch again once the store is back: it lands once.
- The lease of a running run is two columns of its row (``lease_owner``, ``lease_until``, UNIX
  seconds of the writer's clock). A claim is ``locked``: it locks the thread's row, then the
  run's (``Dialect.lock``; the order every writer takes them in, so none waits for another in
  a circle), decides on what it reads, and moves the thread's version. It waits rather than
  skips: a claim that skipped a row another claim of the same owner holds would tell a live
  driver that it lost its run. The sweep's ``expired_leases`` skips locked rows
  (``Dialect.skip_locked``): a run being claimed right now is not reported.
- The queue of a thread is rows of ``queue`` in ``position`` order. ``begin_run`` reads its head
  with the thread's row (the same read); a dequeue deletes the head in the begin's guarded write,
  guarded itself. Every change of a queue's order (an enqueue, a move first) is a guarded write
  that moves the thread row's version: a begin that read the queue before it runs again and
  sees it, so a new message never starts ahead of one queued before it. Removals are one
  ``DELETE`` (a dequeue racing one finds its head gone and runs again).
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from dataclasses import dataclass, replace

from pydantic import TypeAdapter

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
from ._records import TITLE_CHARS, Batch, Begun, JournalEntry, QueuedMessage, RunRecord, ThreadRecord
from ._sql_tx import Row, Tx, parse_events, parse_joined_messages, parse_journal, parse_messages

__all__ = [
    "ThreadState",
    "ThreadStates",
    "begin_run",
    "claim_run",
    "clear_queue",
    "enqueue_message",
    "ensure_thread",
    "expired_leases",
    "get_messages",
    "get_queued",
    "get_run",
    "get_thread",
    "last_seq",
    "parse_queued",
    "queued_messages",
    "queued_threads",
    "read_events",
    "read_journal",
    "remove_queued",
    "renew_lease",
    "thread_runs",
    "update_queued",
    "write",
]

Message = UserMessage | AssistantMessage | ToolMessage

_RECENT = 16
"""Write ids a thread remembers: more than a driver ever has in flight on it."""

_MAX_SEQ = 2**62
"""No thread gets this far: a larger ``after_seq`` reads nothing (and fits no BIGINT)."""

_STATE = "SELECT version, seq, running, recent, first_text FROM threads WHERE thread_id = $1"
_BEGIN_STATE = (
    "SELECT version, seq, running, recent, first_text, owner_key, EXISTS ("
    "SELECT 1 FROM approvals WHERE approvals.thread_id = threads.thread_id AND status = 'pending'"
    "), (SELECT message_id FROM queue WHERE queue.thread_id = threads.thread_id ORDER BY position LIMIT 1)"
    " FROM threads WHERE thread_id = $1"
)
"""The thread's row as a begin reads it: its state, owner, whether it is parked, the head of its queue."""
_BEGIN_STATE_AND_HISTORY = _BEGIN_STATE.replace(
    " FROM threads WHERE",
    ", (SELECT {joined} FROM (SELECT id, body FROM messages WHERE thread_id = $1 ORDER BY id DESC LIMIT $2) AS newest)"
    " FROM threads WHERE",
)
"""The thread's row and its history's bodies joined by commas, in one read (``Dialect.joined_bodies``)."""
_NEW_THREAD = (
    "INSERT INTO threads (thread_id, owner_key, record, last_ts) VALUES ($1, $2, $3, $4) "
    "ON CONFLICT (thread_id) DO NOTHING"
)
_THREAD_CREATED = (
    "INSERT INTO threads (thread_id, owner_key, record, version, seq, running, recent, first_text, last_ts) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (thread_id) DO NOTHING"
)
_EVENT = "INSERT INTO events (thread_id, seq, body) VALUES ($1, $2, $3)"
_JOURNAL = "INSERT INTO journal (thread_id, run_id, body) VALUES ($1, $2, $3)"
_MESSAGE = "INSERT INTO messages (thread_id, body) VALUES ($1, $2)"
_APPROVAL = (
    "INSERT INTO approvals (tool_call_id, thread_id, status, expires_ts, record, requested_ts) "
    "VALUES ($1, $2, $3, $4, $5, $6) "
    "ON CONFLICT (tool_call_id) DO UPDATE SET status = excluded.status, expires_ts = excluded.expires_ts, "
    "record = excluded.record, requested_ts = excluded.requested_ts"
)
_DEQUEUED = "DELETE FROM queue WHERE message_id = $1 AND thread_id = $2"
_RUN_BEGUN = (
    "INSERT INTO runs (run_id, thread_id, begun, status, record, lease_owner, lease_until) "
    "VALUES ($1, $2, 1, $3, $4, $5, $6) ON CONFLICT (run_id) DO UPDATE SET thread_id = excluded.thread_id, "
    "begun = 1, status = excluded.status, record = excluded.record, lease_owner = excluded.lease_owner, "
    "lease_until = excluded.lease_until"
)
_RUN_SAVED = (
    "INSERT INTO runs (run_id, thread_id, status, record) VALUES ($1, $2, $3, $4) "
    "ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, record = excluded.record"
)
_RUN_RELEASED = (
    "INSERT INTO runs (run_id, thread_id, status, record) VALUES ($1, $2, $3, $4) "
    "ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, record = excluded.record, "
    "lease_owner = NULL, lease_until = NULL"
)
_THREAD_WRITTEN = (
    "UPDATE threads SET version = $8, seq = $2, running = $3, recent = $4, last_ts = $5, first_text = $6 "
    "WHERE thread_id = $1 AND version = $7"
)


def _new_version() -> int:
    """A version no other change of the row takes.

    Random, so two writers that read the same row (or built on a write that never landed) can
    never both pass a guard on it.
    """
    return random.getrandbits(62)


@dataclass(frozen=True, kw_only=True, slots=True)
class ThreadState:
    """The row of a thread as a write reads it (or as this store last wrote it)."""

    version: int
    seq: int
    running: str | None
    recent: str
    first_text: str | None

    def seen(self, write_id: str) -> int | None:
        """The first seq of the write named ``write_id`` if this thread applied it already."""
        for entry in self.recent.split(";"):
            name, _, first = entry.rpartition(":")
            if name and name == write_id:
                return int(first)
        return None

    def remember(self, write_id: str, first: int) -> str:
        """``recent`` with this write added (and the oldest beyond ``_RECENT`` dropped)."""
        entries = [entry for entry in self.recent.split(";") if entry][-(_RECENT - 1) :]
        return "".join(f"{entry};" for entry in [*entries, f"{write_id}:{first}"])


class ThreadStates:
    """The rows of the threads this store wrote last, so that a write need not read its row first.

    A hint, never the truth: a write guards on the version it used, so a stale entry (another
    process wrote the thread since) costs the write one more try, never a wrong write. The
    store drops a thread's entry whenever a call on it failed. Bounded: least recent out.
    """

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._states: OrderedDict[str, ThreadState] = OrderedDict()

    def get(self, thread_id: str) -> ThreadState | None:
        """The thread's row as last written here, if known."""
        return self._states.get(thread_id)

    def put(self, thread_id: str, state: ThreadState) -> None:
        """Remember the thread's row as written now."""
        self._states[thread_id] = state
        self._states.move_to_end(thread_id)
        if len(self._states) > self._limit:
            self._states.popitem(last=False)

    def discard(self, thread_id: str) -> None:
        """Forget the thread's row (it changed, or a call on it failed)."""
        self._states.pop(thread_id, None)


def _state(row: Row) -> ThreadState:
    return ThreadState(version=row[0], seq=row[1], running=row[2], recent=row[3], first_text=row[4])


def _numbered(events: list[RunEvent], first: int) -> list[RunEvent]:
    for offset, event in enumerate(events):
        event.seq = first + offset  # the writer's own, fresh objects (as in every store)
    return events


def _first_text(messages: list[Message]) -> str | None:
    for message in messages:
        if isinstance(message, UserMessage):
            return message.content[:TITLE_CHARS]
    return None


async def _apply(
    tx: Tx,
    thread_id: str,
    thread: ThreadState,
    batch: Batch,
    states: ThreadStates,
    *,
    lease: tuple[str, float] | None = None,
    created: ThreadRecord | None = None,
) -> list[RunEvent]:
    """Write ``batch`` on a thread whose row was read as ``thread`` (``lease``: a run begins).

    The thread row's write comes first, guarded: its update by the version that was read, or
    (``created``: the thread was not there) its insertion, whole, by its absence. The rest is
    written only with it, and no row twice (``_pg_batch`` sends it all as one statement).
    """
    first = thread.seq + 1
    events = _numbered(batch.events, first)
    bodies = [event.model_dump_json() for event in events]
    run = batch.run
    running = thread.running
    if run is not None and lease is not None:
        running = run.run_id
    elif run is not None and batch.release and running == run.run_id:
        running = None
    written = replace(
        thread,
        version=_new_version(),
        seq=first + len(events) - 1,
        running=running,
        recent=thread.remember(batch.write_id, first),
        first_text=thread.first_text if thread.first_text is not None else _first_text(batch.messages),
    )
    if created is not None:
        await tx.guard(
            _THREAD_CREATED,
            thread_id,
            created.owner_key,
            created.model_dump_json(),
            written.version,
            written.seq,
            written.running,
            written.recent,
            written.first_text,
            time.time(),
        )
    else:
        await tx.guard(
            _THREAD_WRITTEN,
            thread_id,
            written.seq,
            written.running,
            written.recent,
            time.time(),
            written.first_text,
            thread.version,
            written.version,
        )
    if bodies:
        await tx.put_many(_EVENT, [(thread_id, event.seq, body) for event, body in zip(events, bodies, strict=True)])
    if run is not None:
        record = run.model_dump_json()
        if lease is not None:
            await tx.put(_RUN_BEGUN, run.run_id, thread_id, run.status, record, lease[0], lease[1])
        else:
            await tx.put(_RUN_RELEASED if batch.release else _RUN_SAVED, run.run_id, thread_id, run.status, record)
        if batch.journal:
            await tx.put_many(_JOURNAL, [(thread_id, run.run_id, entry.model_dump_json()) for entry in batch.journal])
    if batch.messages:
        await tx.put_many(_MESSAGE, [(thread_id, message.model_dump_json()) for message in batch.messages])
    if batch.approvals:
        approvals = {a.tool_call_id: a for a in batch.approvals}  # one row each: the last record of it wins
        rows = [
            (a.tool_call_id, thread_id, a.status, a.expires_ts, a.model_dump_json(), a.requested_ts)
            for a in approvals.values()
        ]
        await tx.put_many(_APPROVAL, rows)
    if bodies:
        await tx.notify(thread_id, events, bodies)
    states.put(thread_id, written)  # the store forgets it again if the writes do not land
    return events


# -- threads, runs, journal, history ---------------------------------------------------------------


async def get_thread(tx: Tx, thread_id: str) -> ThreadRecord | None:
    """The thread, or ``None``."""
    row = await tx.fetchrow("SELECT record FROM threads WHERE thread_id = $1", thread_id)
    return ThreadRecord.model_validate_json(row[0]) if row is not None else None


async def ensure_thread(tx: Tx, thread: ThreadRecord) -> ThreadRecord:
    """Create ``thread`` unless a thread of that id exists; answer the stored one."""
    await tx.put(_NEW_THREAD, thread.thread_id, thread.owner_key, thread.model_dump_json(), time.time())
    stored = await get_thread(tx, thread.thread_id)
    if stored is None:  # erased between the two statements
        raise ThreadNotFoundError(f"no thread {thread.thread_id!r}")
    return stored


async def _history(tx: Tx, thread_id: str, limit: int | None) -> list[Message]:
    if not limit:
        rows = await tx.fetch("SELECT body FROM messages WHERE thread_id = $1 ORDER BY id", thread_id)
    else:
        rows = await tx.fetch(
            "SELECT body FROM (SELECT id, body FROM messages WHERE thread_id = $1 ORDER BY id DESC LIMIT $2) "
            "AS newest ORDER BY id",
            thread_id,
            limit,
        )
    return parse_messages([row[0] for row in rows])


async def _begin_read(tx: Tx, thread_id: str, limit: int | None) -> tuple[Row | None, list[Message]]:
    """The thread's row as a begin reads it, and its history (in the same round trip where the dialect can)."""
    joined = tx.dialect.joined_bodies
    if joined is None:
        row = await tx.fetchrow(_BEGIN_STATE, thread_id)
        return row, await _history(tx, thread_id, limit) if row is not None else []
    row = await tx.fetchrow(_BEGIN_STATE_AND_HISTORY.format(joined=joined), thread_id, limit or None)
    return row, parse_joined_messages(row[8]) if row is not None and row[8] else []


async def begin_run(
    tx: Tx,
    run: RunRecord,
    *,
    thread: ThreadRecord,
    batch: Batch,
    lease_owner: str,
    lease_ttl: float,
    history_limit: int | None,
    states: ThreadStates,
    assume_new: bool = False,
    dequeue: str | None = None,
) -> Begun:
    """Start ``run`` and apply ``batch`` (``guarded``); see ``Store.begin_run``.

    ``assume_new``: write as if the thread did not exist, without reading it first (where reads
    are round trips: a new conversation's turn); the thread's insertion is guarded by its absence,
    so when it does exist nothing is written and the call runs again, reading it. A new thread
    has no queue.

    ``dequeue``: the head of the queue the row read names; its deletion is guarded too, so a
    message removed (or begun by another process) since the read makes the call run again.
    """
    thread_id = thread.thread_id
    row, history = (None, []) if assume_new else await _begin_read(tx, thread_id, history_limit)
    created: ThreadRecord | None = None
    if row is None:  # a new thread: its insertion is guarded too (by its absence)
        if dequeue is not None:
            raise QueuedMessageNotFoundError(f"{dequeue!r} is not queued on thread {thread_id!r}")
        created = thread
        state = ThreadState(version=0, seq=0, running=None, recent="", first_text=None)
    else:
        state, owner, parked = _state(row), row[5], bool(row[6])
        first = state.seen(batch.write_id)
        if first is not None:  # this very begin, sent again after a lost reply
            return Begun(events=_numbered(batch.events, first), history=history)
        if owner != thread.owner_key:
            raise ThreadForbiddenError(f"Thread {thread_id!r} belongs to another actor")
        if state.running is not None:
            raise ThreadBusyError(f"A run is already running on thread {thread_id!r}")
        if parked:
            raise ThreadParkedError(f"A run on thread {thread_id!r} waits for an approval")
        if dequeue is None and row[7] is not None:
            raise ThreadBusyError(f"Messages wait in the queue of thread {thread_id!r}")
        if dequeue is not None and row[7] != dequeue:
            raise QueuedMessageNotFoundError(f"{dequeue!r} is not the first queued message any more")
    history.extend(batch.messages)
    if history_limit:
        history = history[-history_limit:]
    batch.run = run.model_copy(update={"status": "running", "thread_id": thread_id, "first_seq": state.seq + 1})
    lease = (lease_owner, time.time() + lease_ttl)
    events = await _apply(tx, thread_id, state, batch, states, lease=lease, created=created)
    if dequeue is not None:
        await tx.guard(_DEQUEUED, dequeue, thread_id)
    return Begun(events=events, history=history)


async def write(tx: Tx, thread_id: str, batch: Batch, states: ThreadStates) -> list[RunEvent]:
    """Apply ``batch`` (``guarded``); see ``Store.write``."""
    state = states.get(thread_id)
    if state is None:
        row = await tx.fetchrow(_STATE, thread_id)
        if row is None:
            raise ThreadNotFoundError(f"no thread {thread_id!r}")
        state = _state(row)
    first = state.seen(batch.write_id)
    if first is not None:  # applied before: the reply was lost
        return _numbered(batch.events, first)
    return await _apply(tx, thread_id, state, batch, states)


async def get_run(tx: Tx, run_id: str) -> RunRecord | None:
    """The run, or ``None``."""
    row = await tx.fetchrow("SELECT record FROM runs WHERE run_id = $1", run_id)
    return RunRecord.model_validate_json(row[0]) if row is not None else None


async def thread_runs(tx: Tx, thread_id: str) -> list[RunRecord]:
    """The thread's runs, oldest first."""
    rows = await tx.fetch("SELECT record FROM runs WHERE thread_id = $1 AND begun = 1 ORDER BY id", thread_id)
    return [RunRecord.model_validate_json(row[0]) for row in rows]


async def read_journal(tx: Tx, thread_id: str, run_id: str) -> list[JournalEntry]:
    """The run's journal, in order."""
    rows = await tx.fetch("SELECT body FROM journal WHERE run_id = $1 ORDER BY id", run_id)
    return parse_journal([row[0] for row in rows])


async def get_messages(tx: Tx, thread_id: str) -> list[Message]:
    """The thread's history, in order."""
    return await _history(tx, thread_id, None)


# -- the event log ---------------------------------------------------------------------------------


async def read_events(tx: Tx, thread_id: str, after_seq: int, limit: int | None) -> list[RunEvent]:
    """Events with ``seq > after_seq``, in order (at most ``limit``)."""
    if (limit is not None and limit <= 0) or after_seq >= _MAX_SEQ:
        return []
    sql = "SELECT body FROM events WHERE thread_id = $1 AND seq > $2 ORDER BY seq"
    after = max(after_seq, 0)
    rows = await (
        tx.fetch(sql, thread_id, after) if limit is None else tx.fetch(f"{sql} LIMIT $3", thread_id, after, limit)
    )
    return parse_events([row[0] for row in rows])


async def last_seq(tx: Tx, thread_id: str) -> int:
    """The newest ``seq`` of the thread (0 when empty)."""
    row = await tx.fetchrow("SELECT seq FROM threads WHERE thread_id = $1", thread_id)
    return int(row[0]) if row is not None else 0


# -- leases ----------------------------------------------------------------------------------------


async def claim_run(
    tx: Tx, run_id: str, *, owner: str, ttl: float, expect: frozenset[str], states: ThreadStates
) -> RunRecord | None:
    """Make ``owner`` the run's driver (``locked``); see ``Store.claim_run``."""
    found = await tx.fetchrow("SELECT thread_id FROM runs WHERE run_id = $1", run_id)
    if found is None:
        return None
    thread_id = found[0]
    # The thread's row first, as every write locks it: two lockers never wait for each other.
    slot = await tx.fetchrow("SELECT running FROM threads WHERE thread_id = $1" + tx.dialect.lock, thread_id)
    if slot is None:
        return None  # erased
    row = await tx.fetchrow(
        "SELECT status, record, lease_owner, lease_until FROM runs WHERE run_id = $1" + tx.dialect.lock, run_id
    )
    if row is None:
        return None
    status, record, holder, until = row
    now = time.time()
    if status not in expect or (holder is not None and holder != owner and until > now):
        return None
    if slot[0] not in (None, run_id):
        return None
    run = RunRecord.model_validate_json(record).model_copy(update={"status": "running", "updated_at": now_iso()})
    await tx.put(
        "UPDATE runs SET status = $2, record = $3, lease_owner = $4, lease_until = $5 WHERE run_id = $1",
        run_id,
        run.status,
        run.model_dump_json(),
        owner,
        now + ttl,
    )
    await tx.put(
        "UPDATE threads SET running = $2, version = $3 WHERE thread_id = $1", thread_id, run_id, _new_version()
    )
    states.discard(thread_id)
    return run


async def renew_lease(tx: Tx, thread_id: str, run_id: str, *, owner: str, ttl: float) -> bool:
    """Extend the lease while ``owner`` holds it and it has not lapsed."""
    now = time.time()
    changed = await tx.execute(
        "UPDATE runs SET lease_until = $3 WHERE run_id = $1 AND lease_owner = $2 AND lease_until > $4",
        run_id,
        owner,
        now + ttl,
        now,
    )
    return changed > 0


async def expired_leases(tx: Tx, limit: int) -> list[tuple[str, str]]:
    """Running runs whose lease lapsed; rows another transaction holds (a claim) are skipped."""
    rows = await tx.fetch(
        "SELECT thread_id, run_id FROM runs WHERE lease_until <= $1 AND status = 'running' "
        "ORDER BY lease_until LIMIT $2" + tx.dialect.skip_locked,
        time.time(),
        limit,
    )
    return [(row[0], row[1]) for row in rows]


# -- the per-thread message queue ------------------------------------------------------------------

_QUEUED: TypeAdapter[list[QueuedMessage]] = TypeAdapter(list[QueuedMessage])

_ENQUEUE_STATE = (
    "SELECT version, seq, running, recent, first_text, "
    "(SELECT count(*) FROM queue WHERE thread_id = $1), "
    "(SELECT min(position) FROM queue WHERE thread_id = $1), "
    "(SELECT max(position) FROM queue WHERE thread_id = $1), "
    "(SELECT count(*) FROM queue AS q WHERE q.thread_id = $1 AND q.position <= "
    "(SELECT position FROM queue WHERE message_id = $2)) "
    "FROM threads WHERE thread_id = $1"
)
"""The thread's row, its queue's length and ends, and the position of ``$2`` when it is queued already."""
_QUEUED_STATE = (
    "SELECT q.thread_id, q.position, q.body, t.version, t.seq, t.running, t.recent, t.first_text, "
    "(SELECT min(position) FROM queue WHERE thread_id = q.thread_id) "
    "FROM queue AS q JOIN threads AS t ON t.thread_id = q.thread_id WHERE q.message_id = $1"
)
_VERSION_MOVED = "UPDATE threads SET version = $2 WHERE thread_id = $1 AND version = $3"


def parse_queued(bodies: list[str]) -> list[QueuedMessage]:
    """Stored queued messages, in one pydantic call."""
    return _QUEUED.validate_json("[" + ",".join(bodies) + "]") if bodies else []


async def _move_version(tx: Tx, thread_id: str, state: ThreadState, states: ThreadStates) -> None:
    """Give the thread row a new version (guarded by the one read): the queue's order changed."""
    moved = replace(state, version=_new_version())
    await tx.guard(_VERSION_MOVED, thread_id, moved.version, state.version)
    states.put(thread_id, moved)  # forgotten again if the writes do not land


async def enqueue_message(tx: Tx, item: QueuedMessage, *, limit: int, first: bool, states: ThreadStates) -> int:
    """Queue ``item`` (``guarded`` on the thread row's version); see ``Store.enqueue_message``."""
    row = await tx.fetchrow(_ENQUEUE_STATE, item.thread_id, item.message_id)
    if row is None:
        raise ThreadNotFoundError(f"no thread {item.thread_id!r}")
    if row[8]:  # this very message, queued already (sent again after a lost reply)
        return int(row[8])
    count, low, high = int(row[5]), row[6], row[7]
    if count >= limit:
        raise QueueFullError(f"The queue of this conversation holds {limit} messages already")
    position = (low - 1 if first else high + 1) if count else 0
    await _move_version(tx, item.thread_id, _state(row), states)
    await tx.put(
        "INSERT INTO queue (message_id, thread_id, position, queued_ts, body) VALUES ($1, $2, $3, $4, $5)",
        item.message_id,
        item.thread_id,
        position,
        item.queued_ts,
        item.model_dump_json(),
    )
    return 1 if first else count + 1


async def queued_messages(tx: Tx, thread_id: str) -> list[QueuedMessage]:
    """The thread's queue, first first."""
    rows = await tx.fetch("SELECT body FROM queue WHERE thread_id = $1 ORDER BY position", thread_id)
    return parse_queued([row[0] for row in rows])


async def get_queued(tx: Tx, message_id: str) -> QueuedMessage | None:
    """A queued message, or ``None``."""
    row = await tx.fetchrow("SELECT body FROM queue WHERE message_id = $1", message_id)
    return QueuedMessage.model_validate_json(row[0]) if row is not None else None


async def update_queued(
    tx: Tx, message_id: str, *, turn: Turn | None, first: bool, states: ThreadStates
) -> QueuedMessage | None:
    """Edit and/or move a queued message first (``guarded``: a move on the thread row's version)."""
    row = await tx.fetchrow(_QUEUED_STATE, message_id)
    if row is None:
        return None
    thread_id, position, body, low = row[0], row[1], row[2], row[8]
    item = QueuedMessage.model_validate_json(body)
    if turn is not None:
        item = item.model_copy(update={"turn": turn})
        body = item.model_dump_json()
    if first and position != low:
        await _move_version(tx, thread_id, _state(row[3:8]), states)
        await tx.guard(
            "UPDATE queue SET position = $2, body = $3 WHERE message_id = $1 AND position = $4",
            message_id,
            low - 1,
            body,
            position,
        )
    elif turn is not None:
        await tx.guard("UPDATE queue SET body = $2 WHERE message_id = $1", message_id, body)
    return item


async def remove_queued(tx: Tx, message_id: str) -> QueuedMessage | None:
    """Take a message out of its queue (one statement)."""
    row = await tx.fetchrow("DELETE FROM queue WHERE message_id = $1 RETURNING body", message_id)
    return QueuedMessage.model_validate_json(row[0]) if row is not None else None


async def clear_queue(tx: Tx, thread_id: str) -> list[QueuedMessage]:
    """Empty the thread's queue (one statement); answer what it held, first first."""
    rows = await tx.fetch("DELETE FROM queue WHERE thread_id = $1 RETURNING position, body", thread_id)
    return parse_queued([row[1] for row in sorted(rows, key=lambda row: int(row[0]))])


async def queued_threads(tx: Tx, limit: int) -> list[str]:
    """Idle threads whose queue holds a message (no run running, none parked), the longest waiting first."""
    rows = await tx.fetch(
        "SELECT q.thread_id FROM queue q JOIN threads t ON t.thread_id = q.thread_id"
        " WHERE t.running IS NULL AND NOT EXISTS"
        " (SELECT 1 FROM approvals a WHERE a.thread_id = q.thread_id AND a.status = 'pending')"
        " GROUP BY q.thread_id ORDER BY min(q.queued_ts), q.thread_id LIMIT $1",
        max(limit, 0),
    )
    return [row[0] for row in rows]
