"""The SQL stores' logic of approvals, confirm tokens, channel state and threads as data.

Each function is one store call over a ``Tx`` (see ``_sql_tx``). Compare-and-set operations are
one conditional statement (``UPDATE ... WHERE status = 'pending'``, an upsert that replaces only
an expired row), so of two processes racing, exactly one sees its row changed.

Expiring rows (channel state, confirm tokens) are never answered once expired, and ``sweep``
deletes them now and then.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..events import now_iso
from ._records import ApprovalRecord, ApprovalState, RunRecord, ThreadRecord, ThreadSummary
from ._sql_log import ThreadStates
from ._sql_tx import Tx, as_iso
from ._sql_usage import sweep_usage

__all__ = [
    "channel_claim",
    "channel_delete",
    "channel_delete_if",
    "channel_get",
    "channel_renew_if",
    "channel_set",
    "claim_confirm_token",
    "delete_thread",
    "expired_approvals",
    "get_approval",
    "idle_threads",
    "is_remembered",
    "list_threads",
    "open_approvals",
    "pending_approvals",
    "recent_runs",
    "release_confirm_token",
    "rename_thread",
    "settle_approval",
    "sweep",
    "thread_approvals",
]

_LIVE = "(expires_ts IS NULL OR expires_ts > $2)"
"""A channel-state row that has not expired (``$2`` is now)."""

_THREAD_TABLES = ("events", "messages", "journal", "runs", "approvals", "remembered", "media", "queue")
"""Every table with rows of a thread, besides ``threads``: what an erasure empties."""


# -- approvals -------------------------------------------------------------------------------------


async def get_approval(tx: Tx, tool_call_id: str) -> ApprovalRecord | None:
    """The approval, or ``None``."""
    row = await tx.fetchrow("SELECT record FROM approvals WHERE tool_call_id = $1", tool_call_id)
    return ApprovalRecord.model_validate_json(row[0]) if row is not None else None


async def settle_approval(
    tx: Tx,
    tool_call_id: str,
    *,
    status: ApprovalState,
    decided_by: str | None,
    via: str | None,
    reason: str | None,
    remember: bool,
) -> ApprovalRecord | None:
    """Settle a pending approval (``locked``; compare and set on its status); ``None`` when not pending."""
    row = await tx.fetchrow("SELECT record FROM approvals WHERE tool_call_id = $1 AND status = 'pending'", tool_call_id)
    if row is None:
        return None
    approval = ApprovalRecord.model_validate_json(row[0]).model_copy(
        update={
            "status": status,
            "decided_by": decided_by,
            "via": via,
            "reason": reason,
            "decided_at": now_iso(),
            "remember": remember,
        }
    )
    changed = await tx.execute(
        "UPDATE approvals SET status = $2, record = $3 WHERE tool_call_id = $1 AND status = 'pending'",
        tool_call_id,
        status,
        approval.model_dump_json(),
    )
    if not changed:
        return None  # another decision came first
    if remember and status == "approved":
        await tx.put(
            "INSERT INTO remembered (thread_id, tool) VALUES ($1, $2) ON CONFLICT (thread_id, tool) DO NOTHING",
            approval.thread_id,
            approval.tool,
        )
    return approval


async def pending_approvals(tx: Tx, thread_id: str) -> list[ApprovalRecord]:
    """The thread's pending approvals, oldest first."""
    rows = await tx.fetch(
        "SELECT record FROM approvals WHERE thread_id = $1 AND status = 'pending' ORDER BY id", thread_id
    )
    return [ApprovalRecord.model_validate_json(row[0]) for row in rows]


async def thread_approvals(tx: Tx, thread_id: str) -> list[ApprovalRecord]:
    """Every approval of the thread, oldest first."""
    rows = await tx.fetch("SELECT record FROM approvals WHERE thread_id = $1 ORDER BY id", thread_id)
    return [ApprovalRecord.model_validate_json(row[0]) for row in rows]


async def expired_approvals(tx: Tx, now: float, limit: int) -> list[ApprovalRecord]:
    """Pending approvals past their expiry."""
    rows = await tx.fetch(
        "SELECT record FROM approvals WHERE status = 'pending' AND expires_ts <= $1 ORDER BY expires_ts, id LIMIT $2",
        now,
        limit,
    )
    return [ApprovalRecord.model_validate_json(row[0]) for row in rows]


async def open_approvals(tx: Tx, before: tuple[float, str] | None, limit: int) -> list[ApprovalRecord]:
    """Pending approvals of every thread, newest ``(requested_ts, tool_call_id)`` first, after ``before``.

    The record's ``requested_ts`` is the column's (an approval written before the column was
    made has it from its ``requested_at``), so a page's last pair is the next page's cursor.
    """
    columns = "SELECT record, requested_ts FROM approvals WHERE status = 'pending'"
    order = "ORDER BY requested_ts DESC, tool_call_id DESC"
    if before is None:
        rows = await tx.fetch(f"{columns} {order} LIMIT $1", max(limit, 0))
    else:
        rows = await tx.fetch(
            f"{columns} AND (requested_ts < $1 OR (requested_ts = $1 AND tool_call_id < $2)) {order} LIMIT $3",
            float(before[0]),
            before[1],
            max(limit, 0),
        )
    records = [(ApprovalRecord.model_validate_json(record), ts) for record, ts in rows]
    return [a if a.requested_ts == ts else a.model_copy(update={"requested_ts": ts}) for a, ts in records]


async def recent_runs(tx: Tx, limit: int) -> list[RunRecord]:
    """The newest runs of every thread, the last begun first (``id`` order is begin order)."""
    rows = await tx.fetch("SELECT record FROM runs WHERE begun = 1 ORDER BY id DESC LIMIT $1", max(limit, 0))
    return [RunRecord.model_validate_json(row[0]) for row in rows]


async def is_remembered(tx: Tx, thread_id: str, tool: str) -> bool:
    """Whether calls of ``tool`` in the thread are approved without asking."""
    row = await tx.fetchrow("SELECT 1 FROM remembered WHERE thread_id = $1 AND tool = $2", thread_id, tool)
    return row is not None


# -- confirm tokens --------------------------------------------------------------------------------


async def claim_confirm_token(tx: Tx, token_hash: str, expires_at: float) -> bool:
    """Claim a confirm token once (again only after the claim expired with its token)."""
    row = await tx.fetchrow(
        "INSERT INTO confirm_tokens (token_hash, expires_ts) VALUES ($1, $2) ON CONFLICT (token_hash) "
        "DO UPDATE SET expires_ts = excluded.expires_ts WHERE confirm_tokens.expires_ts <= $3 RETURNING 1",
        token_hash,
        expires_at,
        time.time(),
    )
    return row is not None


async def release_confirm_token(tx: Tx, token_hash: str) -> None:
    """Undo a claim."""
    await tx.put("DELETE FROM confirm_tokens WHERE token_hash = $1", token_hash)


# -- channel state ---------------------------------------------------------------------------------


async def channel_get(tx: Tx, key: str) -> Any:
    """A channel's JSON value, or ``None``."""
    row = await tx.fetchrow(f"SELECT value FROM channel_state WHERE key = $1 AND {_LIVE}", key, time.time())
    return json.loads(row[0]) if row is not None else None


async def channel_set(tx: Tx, key: str, value: Any, ttl: float | None) -> None:
    """Store a channel's JSON value, optionally expiring after ``ttl`` seconds."""
    if ttl is not None and ttl <= 0:
        await tx.put("DELETE FROM channel_state WHERE key = $1", key)
        return
    await tx.put(
        "INSERT INTO channel_state (key, value, expires_ts) VALUES ($1, $2, $3) ON CONFLICT (key) "
        "DO UPDATE SET value = excluded.value, expires_ts = excluded.expires_ts",
        key,
        json.dumps(value),
        time.time() + ttl if ttl is not None else None,
    )


async def channel_claim(tx: Tx, key: str, ttl: float, value: Any) -> bool:
    """Set ``key`` only if absent or expired; True if claimed."""
    now = time.time()
    row = await tx.fetchrow(
        "INSERT INTO channel_state (key, value, expires_ts) VALUES ($1, $2, $3) ON CONFLICT (key) "
        "DO UPDATE SET value = excluded.value, expires_ts = excluded.expires_ts "
        "WHERE channel_state.expires_ts IS NOT NULL AND channel_state.expires_ts <= $4 RETURNING 1",
        key,
        json.dumps(value),
        now + ttl,
        now,
    )
    return row is not None


async def channel_delete(tx: Tx, key: str) -> None:
    """Drop a key."""
    await tx.put("DELETE FROM channel_state WHERE key = $1", key)


async def channel_delete_if(tx: Tx, key: str, expected: Any) -> bool:
    """Drop ``key`` only while it holds ``expected``."""
    changed = await tx.execute(
        f"DELETE FROM channel_state WHERE key = $1 AND {_LIVE} AND value = $3", key, time.time(), json.dumps(expected)
    )
    return changed > 0


async def channel_renew_if(tx: Tx, key: str, expected: Any, ttl: float) -> bool:
    """Give ``key`` a new ``ttl`` only while it holds ``expected``."""
    now = time.time()
    changed = await tx.execute(
        f"UPDATE channel_state SET expires_ts = $4 WHERE key = $1 AND {_LIVE} AND value = $3",
        key,
        now,
        json.dumps(expected),
        now + ttl,
    )
    return changed > 0


# -- threads as data their owner controls ----------------------------------------------------------


async def list_threads(tx: Tx, owner_key: str, before: tuple[float, str] | None, limit: int) -> list[ThreadSummary]:
    """The owner's threads, newest activity first, after the cursor ``before``."""
    columns = "SELECT thread_id, title, first_text, record, last_ts FROM threads WHERE owner_key = $1"
    order = "ORDER BY last_ts DESC, thread_id DESC"
    if before is None:
        rows = await tx.fetch(f"{columns} {order} LIMIT $2", owner_key, max(limit, 0))
    else:
        rows = await tx.fetch(
            f"{columns} AND (last_ts < $2 OR (last_ts = $2 AND thread_id < $3)) {order} LIMIT $4",
            owner_key,
            float(before[0]),
            before[1],
            max(limit, 0),
        )
    summaries: list[ThreadSummary] = []
    for thread_id, title, first_text, record, last_ts in rows:
        stored = ThreadRecord.model_validate_json(record)
        summaries.append(
            ThreadSummary(
                thread_id=thread_id,
                title=title if title is not None else first_text,
                channel=stored.channel,
                created_at=stored.created_at,
                last_activity=as_iso(last_ts),
                last_activity_ts=last_ts,
            )
        )
    return summaries


async def rename_thread(tx: Tx, thread_id: str, title: str | None) -> bool:
    """Name the thread (``None``: its first message again); ``False`` when no such thread."""
    return await tx.execute("UPDATE threads SET title = $2 WHERE thread_id = $1", thread_id, title) > 0


async def delete_thread(tx: Tx, thread_id: str, states: ThreadStates) -> bool:
    """Erase the thread and every row of it, media included (``locked``)."""
    # The thread's row first: a write in flight holds it, and one after this finds no thread.
    erased = await tx.execute("DELETE FROM threads WHERE thread_id = $1", thread_id)
    for table in _THREAD_TABLES:
        await tx.put(f"DELETE FROM {table} WHERE thread_id = $1", thread_id)
    states.discard(thread_id)
    return erased > 0


async def idle_threads(tx: Tx, before_ts: float, limit: int) -> list[str]:
    """Threads whose last activity is older than ``before_ts``, oldest first."""
    rows = await tx.fetch(
        "SELECT thread_id FROM threads WHERE last_ts < $1 ORDER BY last_ts, thread_id LIMIT $2",
        float(before_ts),
        max(limit, 0),
    )
    return [row[0] for row in rows]


# -- housekeeping ----------------------------------------------------------------------------------


async def sweep(tx: Tx, now: float) -> None:
    """Delete the rows that expired: channel state, confirm tokens, media, renders, old usage, full buckets."""
    await tx.put("DELETE FROM channel_state WHERE expires_ts <= $1", now)
    await tx.put("DELETE FROM confirm_tokens WHERE expires_ts <= $1", now)
    await tx.put("DELETE FROM media WHERE expires_ts <= $1", now)
    await tx.put("DELETE FROM renders WHERE expires_ts <= $1", now)
    await sweep_usage(tx, now)
