"""The SQL stores' logic of threads, runs, the journal, the history, the event log and leases.

Each function is one store call's transaction over a ``Tx`` (see ``_sql_tx``). The rules:

- A write first reads (and, on PostgreSQL, locks: ``Dialect.lock``) its thread's row, then only
  writes: the thread's ``seq`` numbers the events, its ``running`` column is the running slot.
- Writes are idempotent by ``Batch.write_id``: the thread's ``recent`` column keeps its last
  writes' ids with the seq of their first event (``"<id>:<first>;"`` each, the newest
  ``_RECENT`` of them), and a write whose id is there answers its events as first written and
  changes nothing. A driver that lost the reply of its commit (the connection dropped) writes
  the same batch again once the store is back: it lands once.
- The lease of a running run is two columns of its row (``lease_owner``, ``lease_until``, UNIX
  seconds of the writer's clock); claims lock the thread's and the run's rows, skipping rows
  another transaction holds (``Dialect.skip_locked``): a run being claimed elsewhere right now
  is not claimed here too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .._errors import ThreadBusyError, ThreadForbiddenError, ThreadNotFoundError, ThreadParkedError
from ..events import RunEvent, now_iso
from ..models import AssistantMessage, ToolMessage, UserMessage
from ._records import TITLE_CHARS, Batch, Begun, JournalEntry, RunRecord, ThreadRecord
from ._sql_tx import Tx, parse_events, parse_journal, parse_messages

__all__ = [
    "begin_run",
    "claim_run",
    "ensure_thread",
    "expired_leases",
    "get_messages",
    "get_run",
    "get_thread",
    "last_seq",
    "read_events",
    "read_journal",
    "renew_lease",
    "thread_runs",
    "write",
]

Message = UserMessage | AssistantMessage | ToolMessage

_RECENT = 16
"""Write ids a thread remembers: more than a driver ever has in flight on it."""

_MAX_SEQ = 2**62
"""No thread gets this far: a larger ``after_seq`` reads nothing (and fits no BIGINT)."""

_STATE = "SELECT seq, running, recent, first_text FROM threads WHERE thread_id = $1"
_BEGIN_STATE = (
    "SELECT seq, running, recent, first_text, owner_key, EXISTS ("
    "SELECT 1 FROM approvals WHERE approvals.thread_id = threads.thread_id AND status = 'pending'"
    ") FROM threads WHERE thread_id = $1"
)
_NEW_THREAD = (
    "INSERT INTO threads (thread_id, owner_key, record, last_ts) VALUES ($1, $2, $3, $4) "
    "ON CONFLICT (thread_id) DO NOTHING RETURNING seq"
)
_EVENT = "INSERT INTO events (thread_id, seq, body) VALUES ($1, $2, $3)"
_JOURNAL = "INSERT INTO journal (thread_id, run_id, body) VALUES ($1, $2, $3)"
_MESSAGE = "INSERT INTO messages (thread_id, body) VALUES ($1, $2)"
_APPROVAL = (
    "INSERT INTO approvals (tool_call_id, thread_id, status, expires_ts, record) VALUES ($1, $2, $3, $4, $5) "
    "ON CONFLICT (tool_call_id) DO UPDATE SET status = excluded.status, expires_ts = excluded.expires_ts, "
    "record = excluded.record"
)
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
    "UPDATE threads SET seq = $2, running = $3, recent = $4, last_ts = $5, first_text = $6 WHERE thread_id = $1"
)


@dataclass(kw_only=True)
class _Thread:
    """The row of a thread as a write reads it."""

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
    tx: Tx, thread_id: str, thread: _Thread, batch: Batch, *, lease: tuple[str, float] | None = None
) -> list[RunEvent]:
    """Write ``batch`` on a thread whose row this transaction read (``lease``: a run begins)."""
    now = time.time()
    first = thread.seq + 1
    events = _numbered(batch.events, first)
    bodies = [event.model_dump_json() for event in events]
    if bodies:
        await tx.put_many(_EVENT, [(thread_id, event.seq, body) for event, body in zip(events, bodies, strict=True)])
    running = thread.running
    run = batch.run
    if run is not None:
        record = run.model_dump_json()
        if lease is not None:
            await tx.put(_RUN_BEGUN, run.run_id, thread_id, run.status, record, lease[0], lease[1])
            running = run.run_id
        elif batch.release:
            await tx.put(_RUN_RELEASED, run.run_id, thread_id, run.status, record)
            if running == run.run_id:
                running = None
        else:
            await tx.put(_RUN_SAVED, run.run_id, thread_id, run.status, record)
        if batch.journal:
            await tx.put_many(_JOURNAL, [(thread_id, run.run_id, entry.model_dump_json()) for entry in batch.journal])
    if batch.messages:
        await tx.put_many(_MESSAGE, [(thread_id, message.model_dump_json()) for message in batch.messages])
    if batch.approvals:
        rows = [(a.tool_call_id, thread_id, a.status, a.expires_ts, a.model_dump_json()) for a in batch.approvals]
        await tx.put_many(_APPROVAL, rows)
    first_text = thread.first_text if thread.first_text is not None else _first_text(batch.messages)
    recent = thread.remember(batch.write_id, first)
    await tx.put(_THREAD_WRITTEN, thread_id, first + len(events) - 1, running, recent, now, first_text)
    if bodies:
        await tx.notify(thread_id, events, bodies)
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


async def begin_run(
    tx: Tx,
    run: RunRecord,
    *,
    thread: ThreadRecord,
    batch: Batch,
    lease_owner: str,
    lease_ttl: float,
    history_limit: int | None,
) -> Begun:
    """Start ``run`` and apply ``batch``; see ``Store.begin_run``."""
    thread_id = thread.thread_id
    row = await tx.fetchrow(_BEGIN_STATE + tx.dialect.lock, thread_id)
    if row is None and await tx.fetchrow(_NEW_THREAD, thread_id, thread.owner_key, thread.model_dump_json(), 0.0):
        row = (0, None, "", None, thread.owner_key, False)
    elif row is None:  # another transaction created it meanwhile: wait for it and read what it did
        row = await tx.fetchrow(_BEGIN_STATE + tx.dialect.lock, thread_id)
        if row is None:
            raise ThreadBusyError(f"Thread {thread_id!r} is being created and erased right now")
    state = _Thread(seq=row[0], running=row[1], recent=row[2], first_text=row[3])
    first = state.seen(batch.write_id)
    if first is not None:  # this very begin, sent again after a lost reply
        return Begun(events=_numbered(batch.events, first), history=await _history(tx, thread_id, history_limit))
    if row[4] != thread.owner_key:
        raise ThreadForbiddenError(f"Thread {thread_id!r} belongs to another actor")
    if state.running is not None:
        raise ThreadBusyError(f"A run is already running on thread {thread_id!r}")
    if row[5]:
        raise ThreadParkedError(f"A run on thread {thread_id!r} waits for an approval")
    history = await _history(tx, thread_id, history_limit)
    history.extend(batch.messages)
    if history_limit:
        history = history[-history_limit:]
    batch.run = run.model_copy(update={"status": "running", "thread_id": thread_id, "first_seq": state.seq + 1})
    events = await _apply(tx, thread_id, state, batch, lease=(lease_owner, time.time() + lease_ttl))
    return Begun(events=events, history=history)


async def write(tx: Tx, thread_id: str, batch: Batch) -> list[RunEvent]:
    """Apply ``batch``; see ``Store.write``."""
    row = await tx.fetchrow(_STATE + tx.dialect.lock, thread_id)
    if row is None:
        raise ThreadNotFoundError(f"no thread {thread_id!r}")
    state = _Thread(seq=row[0], running=row[1], recent=row[2], first_text=row[3])
    first = state.seen(batch.write_id)
    if first is not None:  # applied before: the reply was lost
        return _numbered(batch.events, first)
    return await _apply(tx, thread_id, state, batch)


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


async def claim_run(tx: Tx, run_id: str, *, owner: str, ttl: float, expect: frozenset[str]) -> RunRecord | None:
    """Make ``owner`` the run's driver; see ``Store.claim_run``."""
    found = await tx.fetchrow("SELECT thread_id FROM runs WHERE run_id = $1", run_id)
    if found is None:
        return None
    thread_id = found[0]
    # The thread's row first, as every write locks it: two lockers never wait for each other.
    slot = await tx.fetchrow("SELECT running FROM threads WHERE thread_id = $1" + tx.dialect.skip_locked, thread_id)
    if slot is None:
        return None  # being written or claimed by another transaction right now (or erased)
    row = await tx.fetchrow(
        "SELECT status, record, lease_owner, lease_until FROM runs WHERE run_id = $1" + tx.dialect.skip_locked, run_id
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
    await tx.put("UPDATE threads SET running = $2 WHERE thread_id = $1", thread_id, run_id)
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
