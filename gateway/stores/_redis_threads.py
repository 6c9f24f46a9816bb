"""``RedisThreads``: a ``RedisStore``'s threads as data their owner controls.

The list of an owner's threads, names, erasure, retention's idle threads and the export of a
thread's approvals. The indexes (``P:owner:<sha256>``, ``P:activity:{b}``; see ``_redis_layout``)
are written beside the store's own scripts (``index_begin``, ``index_write``); everything here
reads them as candidates and checks each against the thread's keys.

The global indexes are bucketed: a thread's entries are all in its bucket
(``RedisKeys.index(name, thread_id)``), and a reader reads every bucket at once (``_merged``:
one round trip per page, each command naming one bucket, so on a Cluster each goes to its own
node) and merges them in order; a correction names the bucket its entry is in.
``migrate_legacy_indexes`` moves what the old single keys (``P:activity`` ...) still hold.

Erasure, in an order that never leaves a thread half visible:

1. read the thread's run ids (and the index entries' scores);
2. ``ERASE`` deletes every key of the thread at once, in one slot, if its runs are still those
   (else read again): from here on every read of the thread answers empty or ``None``, and a
   write to it finds no thread;
3. the global entries go: each run's, approval's and queued message's index key, their lease,
   expiry, open-approval and recent-run entries, and the activity and queue entries (only
   where nobody moved them since step 1: a thread begun again under the same id in between
   keeps its own).

A process that dies between 2 and 3 leaves index entries that name nothing: readers drop them
as they meet them, and the run and approval index keys point at records that are gone.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from .._errors import ThreadBusyError
from ..models import MESSAGE_ADAPTER, UserMessage
from ._records import TITLE_CHARS, ApprovalRecord, ThreadRecord, ThreadSummary
from ._redis_batch import Command
from ._redis_layout import (
    INDEX_NAMES,
    IndexName,
    as_text,
    index_member,
    json_array,
    score_pairs,
    score_text,
)
from ._redis_part import RedisPart, Row, Verdict
from ._redis_scripts import ERASE, RECONCILE, RENAME, run_scripts

__all__ = ["RedisPart", "RedisThreads"]  # RedisPart re-exported: its home was here

_OWNERS_KEPT = 4096

_OWNER_PAGE = 1000
"""Entries of an owner's old list moved per round trip."""
"""Threads whose owner a process remembers (those it began or claimed a run of)."""

_ERASE_TRIES = 8


_MIGRATE_PAGE = 1000
"""Entries of an old single-key index moved per round trip."""

_THREAD_AT: dict[str, int | None] = {
    "activity": None,
    "queued-threads": None,
    "leases": 0,
    "approval-expiry": 0,
    "open-approvals": 1,
    "recent-runs": 1,
}
"""Where an index's member names its thread: the member itself, or that item of its JSON array."""


def _legacy_thread(name: IndexName, member: str) -> str | None:
    """The thread an old index's member belongs to, or ``None`` when it names none."""
    at = _THREAD_AT[name]
    if at is None:
        return member
    try:
        item = json.loads(member)[at]
    except (ValueError, TypeError, IndexError, KeyError):
        return None
    return item if isinstance(item, str) else None


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")


class RedisThreads(RedisPart):
    """The thread-administration part of ``RedisStore``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._owners: OrderedDict[str, str] = OrderedDict()
        self._owners_migrated: dict[str, None] = {}
        """Owners whose old single-key list this process moved into buckets (or found empty)."""

    # -- index entries written beside the store's scripts -----------------------------------------

    def remember_owner(self, thread_id: str, owner_key: str) -> None:
        """Note the owner of a thread this process began or claimed a run of (its writes move its list)."""
        self._owners[thread_id] = owner_key
        self._owners.move_to_end(thread_id)
        while len(self._owners) > _OWNERS_KEPT:
            self._owners.popitem(last=False)

    def index_begin(self, thread_id: str, owner_key: str, now: str) -> list[Command]:
        """The index writes of a run begun at ``now`` (they create the thread's entries)."""
        return [
            ("ZADD", self._keys.index("activity", thread_id), now, thread_id),
            ("ZADD", self._keys.owner_threads(owner_key, thread_id), now, thread_id),
        ]

    def index_write(self, thread_id: str, owner_key: str | None, now: str) -> list[Command]:
        """The index writes of events written at ``now``: existing entries move, none is made.

        ``owner_key`` is the run record's actor (runs are begun by their thread's owner only),
        else the owner this process remembers, else unknown: then the owner's list moves with
        the run's next write that names it.
        """
        owner_key = owner_key or self._owners.get(thread_id)
        commands: list[Command] = [("ZADD", self._keys.index("activity", thread_id), "XX", now, thread_id)]
        if owner_key is not None:
            commands.append(("ZADD", self._keys.owner_threads(owner_key, thread_id), "XX", now, thread_id))
        return commands

    def refused_begin(self, thread_id: str, owner_key: str) -> Command:
        """Take back the entry a begin refused as someone else's thread put in the caller's list."""
        return ("ZREM", self._keys.owner_threads(owner_key, thread_id), thread_id)

    async def index_ensured(self, thread: ThreadRecord, stored: ThreadRecord) -> None:
        """Give a thread ``ensure_thread`` answered its entries, if it is the caller's (``NX``: kept if there)."""
        if stored.owner_key != thread.owner_key:
            return
        now = score_text(time.time())
        key = self._keys.thread(thread.thread_id, "thread")
        pipe = self._client.pipeline(transaction=False)
        pipe.hsetnx(key, "active", now)
        pipe.zadd(self._keys.index("activity", thread.thread_id), {thread.thread_id: now}, nx=True)
        pipe.zadd(self._keys.owner_threads(thread.owner_key, thread.thread_id), {thread.thread_id: now}, nx=True)
        await pipe.execute()

    # -- reads ------------------------------------------------------------------------------------

    async def list_threads(self, owner_key: str, before: tuple[float, str] | None, limit: int) -> list[ThreadSummary]:
        """The owner's threads by ``(last activity, thread id)`` descending, after ``before`` (every bucket merged)."""
        if limit <= 0:
            return []
        top = score_text(before[0]) if before is not None else "+inf"

        def read(key: str, offset: int, count: int) -> Command:
            return ("ZREVRANGEBYSCORE", key, top, "-inf", "WITHSCORES", "LIMIT", offset, count)

        async def judge(rows: list[Row]) -> list[Verdict]:
            verdicts: list[Verdict] = [(True, None)] * len(rows)
            # At the cursor's own time, only the ids below its id: the others stay, unread.
            checked = [
                at for at, (_, thread_id, score) in enumerate(rows) if before is None or (score, thread_id) < before
            ]
            for at, line in zip(checked, await self._summaries(owner_key, [rows[at] for at in checked]), strict=True):
                verdicts[at] = (line is not None, ((line.last_activity_ts, line.thread_id), line) if line else None)
            return verdicts

        async with self._guard():
            await self._migrate_owner(owner_key)
            return await self._merged(
                self._keys.owner_lists(owner_key), read, judge, limit=limit, page=limit + 8, descending=True, rounds=16
            )

    async def _migrate_owner(self, owner_key: str) -> None:
        """Once per owner and process: move the entries of the owner's old single-key list into its buckets."""
        if owner_key in self._owners_migrated:
            return
        legacy = self._keys.legacy_owner_threads(owner_key)
        for _ in range(1000):
            rows = score_pairs(await self._send_one("ZRANGE", legacy, 0, _OWNER_PAGE - 1, "WITHSCORES"))
            if not rows:
                break
            members = [(as_text(member), as_text(score)) for member, score in rows]
            await self._send_all(
                [
                    ("ZADD", self._keys.owner_threads(owner_key, thread_id), "GT", score, thread_id)
                    for thread_id, score in members
                ]
            )
            await self._reconcile({legacy: [item for thread_id, score in members for item in (thread_id, score, "")]})
        self._owners_migrated[owner_key] = None
        while len(self._owners_migrated) > _OWNERS_KEPT:
            self._owners_migrated.pop(next(iter(self._owners_migrated)))

    async def _summaries(self, owner_key: str, rows: list[Row]) -> list[ThreadSummary | None]:
        """Each row's thread as a line if it is the owner's; entries naming no such thread leave their bucket."""
        if not rows:
            return []
        commands: list[Command] = []
        for _, thread_id, _ in rows:
            commands.append(("HMGET", self._keys.thread(thread_id, "thread"), "owner", "record", "title"))
            commands.append(("LRANGE", self._keys.thread(thread_id, "messages"), 0, 0))
        replies = await self._send_all(commands)
        lines: list[ThreadSummary | None] = []
        stale: dict[str, list[Any]] = {}
        for (key, thread_id, score), (owner, raw, title), first in zip(rows, replies[0::2], replies[1::2], strict=True):
            if owner is None or raw is None or as_text(owner) != owner_key:
                stale.setdefault(key, []).extend([thread_id, score_text(score), ""])
                lines.append(None)
                continue
            record = ThreadRecord.model_validate_json(raw)
            if title is None and first:
                [message] = MESSAGE_ADAPTER.validate_json(json_array(first))
                if isinstance(message, UserMessage) and message.content:
                    title = message.content[:TITLE_CHARS]
            lines.append(
                ThreadSummary(
                    thread_id=thread_id,
                    title=as_text(title) if title is not None else None,
                    channel=record.channel,
                    created_at=record.created_at,
                    last_activity=_iso(score),
                    last_activity_ts=score,
                )
            )
        await self._reconcile(stale)
        return lines

    async def idle_threads(self, before_ts: float, limit: int) -> list[str]:
        """Threads last written to before ``before_ts``, oldest first (every bucket merged), each checked.

        An entry naming no thread is dropped; one behind the thread's own time is moved to it.
        """
        if limit <= 0:
            return []

        def read(key: str, offset: int, count: int) -> Command:
            return ("ZRANGEBYSCORE", key, "-inf", f"({score_text(before_ts)}", "WITHSCORES", "LIMIT", offset, count)

        async def judge(rows: list[Row]) -> list[Verdict]:
            states = await self._send_all(
                [("HMGET", self._keys.thread(thread_id, "thread"), "owner", "active") for _, thread_id, _ in rows]
            )
            verdicts: list[Verdict] = []
            corrections: dict[str, list[Any]] = {}
            for (key, thread_id, score), (owner, active) in zip(rows, states, strict=True):
                if owner is None:
                    corrections.setdefault(key, []).extend([thread_id, score_text(score), ""])
                    verdicts.append((False, None))
                elif active is not None and float(active) >= before_ts:
                    corrections.setdefault(key, []).extend([thread_id, score_text(score), as_text(active)])
                    verdicts.append((False, None))
                else:  # idle ones stay in place: the next page starts after them
                    verdicts.append((True, ((score, thread_id), thread_id)))
            await self._reconcile(corrections)
            return verdicts

        async with self._guard():
            return await self._merged("activity", read, judge, limit=limit, page=limit, descending=False, rounds=8)

    async def thread_approvals(self, thread_id: str) -> list[ApprovalRecord]:
        """Every approval of the thread in the order written (those older than the order, by request time)."""
        async with self._guard():
            pipe = self._client.pipeline(transaction=False)
            pipe.zrange(self._keys.thread(thread_id, "approval-order"), 0, -1)
            pipe.hgetall(self._keys.thread(thread_id, "approvals"))
            order, records = await pipe.execute()
        by_id = {as_text(key): ApprovalRecord.model_validate_json(raw) for key, raw in records.items()}
        ordered = [by_id.pop(as_text(call_id)) for call_id in order if as_text(call_id) in by_id]
        older = sorted(by_id.values(), key=lambda a: (a.requested_at, a.tool_call_id))
        return older + ordered

    # -- the indexes before they were bucketed -----------------------------------------------------

    async def migrate_legacy_indexes(self) -> int:
        """Move the entries of each global index's old single key into their threads' buckets.

        In pages of ``_MIGRATE_PAGE``: each entry is added to its bucket first (``ZADD GT``: an
        entry the bucket has already keeps the later score, which is the newer one for every
        index: activity, queue and lease-check times only grow, and the others never change),
        then leaves the old key only if its score there is still the one read (``RECONCILE``),
        so a process of the old layout still writing there loses nothing: its entry is read
        again and moved with its new score. Two processes migrating at once move each entry once; run again, it finds
        nothing. An entry whose member names no thread stays where it is.

        Returns:
            The entries this call moved.
        """
        moved = 0
        async with self._guard():
            for name in INDEX_NAMES:
                moved += await self._migrate(name)
        return moved

    async def _migrate(self, name: IndexName) -> int:
        legacy = self._keys.legacy_index(name)
        moved = offset = 0
        while True:
            reply = await self._send_one("ZRANGE", legacy, offset, offset + _MIGRATE_PAGE - 1, "WITHSCORES")
            pairs = [(as_text(member), as_text(score)) for member, score in score_pairs(reply)]
            buckets: dict[str, list[Any]] = {}
            triplets: list[Any] = []
            for member, score in pairs:
                thread_id = _legacy_thread(name, member)
                if thread_id is None:
                    offset += 1
                    continue
                buckets.setdefault(self._keys.index(name, thread_id), []).extend([score, member])
                triplets.extend([member, score, ""])
            if buckets:
                added, (removed,) = await self._send_ordered(
                    [("ZADD", key, "GT", *entries) for key, entries in buckets.items()],
                    [RECONCILE.command([legacy], triplets)],
                )
                for result in [*added, removed]:
                    if isinstance(result, Exception):
                        raise result
                moved += int(removed)
                if not removed:  # every one changed meanwhile: pass over them (the next call moves them)
                    offset += len(triplets) // 3
            if len(pairs) < _MIGRATE_PAGE:
                return moved

    # -- writes -----------------------------------------------------------------------------------

    async def rename_thread(self, thread_id: str, title: str | None) -> bool:
        """Name the thread (``None``: drop its name) if it exists."""
        args = ["set", title] if title is not None else ["reset", ""]
        async with self._guard():
            done = await RENAME(self._send_one, [self._keys.thread(thread_id, "thread")], args)
        return bool(done)

    async def delete_thread(self, thread_id: str) -> bool:
        """Erase every key of the thread, then its global entries (see the module's docstring)."""
        async with self._guard():
            for _ in range(_ERASE_TRIES):
                pipe = self._client.pipeline(transaction=False)
                pipe.hget(self._keys.thread(thread_id, "thread"), "owner")
                pipe.lrange(self._keys.thread(thread_id, "run-order"), 0, -1)
                pipe.zscore(self._keys.index("activity", thread_id), thread_id)
                pipe.zscore(self._keys.index("queued-threads", thread_id), thread_id)
                owner, order, activity, queued = await pipe.execute()
                runs = [as_text(run_id) for run_id in order]
                owner_index = self._keys.owner_threads(as_text(owner), thread_id) if owner is not None else None
                commands: list[Command] = []
                if owner_index is not None:
                    commands.append(("ZSCORE", owner_index, thread_id))
                commands.append(ERASE.command(self._erased_keys(thread_id, runs), runs))
                *listed, erased = await run_scripts(self._send, commands, [ERASE])
                if erased != -1:
                    break
            else:
                raise ThreadBusyError(f"Thread {thread_id!r} kept changing while it was being erased; try again")
            owner_seen, approvals = as_text(erased[0]), [as_text(call_id) for call_id in erased[1]]
            messages = [as_text(message_id) for message_id in erased[2]]
            await self._drop_entries(thread_id, runs, approvals, messages, (activity, queued), owner_index, listed)
        self._owners.pop(thread_id, None)
        return owner_seen != ""

    def _erased_keys(self, thread_id: str, runs: list[str]) -> list[str]:
        names = ["thread", "events", "messages", "runs", "run-order", "approvals", "pending", "approval-order"]
        keys = [self._keys.thread(thread_id, name) for name in [*names, "remembered", "queue", "queued"]]
        for run_id in runs:
            keys.append(self._keys.thread(thread_id, f"journal:{run_id}"))
            keys.append(self._keys.thread(thread_id, f"lease:{run_id}"))
        return keys

    async def _drop_entries(
        self,
        thread_id: str,
        runs: list[str],
        approvals: list[str],
        messages: list[str],
        scores: tuple[float | None, float | None],
        owner_index: str | None,
        listed: list[Any],
    ) -> None:
        """The global entries of an erased thread: ids, leases, expiries, the staff's lists, activity, queue."""
        commands: list[Command] = []
        index = self._keys.index  # every entry of the thread is in the thread's bucket
        for run_id in runs:
            commands.append(("DEL", self._keys.run_index(run_id)))
            commands.append(("ZREM", index("leases", thread_id), index_member(thread_id, run_id)))
            commands.append(("ZREM", index("recent-runs", thread_id), index_member(run_id, thread_id)))
        for call_id in approvals:
            commands.append(("DEL", self._keys.approval_index(call_id)))
            commands.append(("ZREM", index("approval-expiry", thread_id), index_member(thread_id, call_id)))
            commands.append(("ZREM", index("open-approvals", thread_id), index_member(call_id, thread_id)))
        for message_id in messages:
            commands.append(("DEL", self._keys.queued_index(message_id)))
        # Only entries nobody moved since they were read: a thread begun again meanwhile keeps its own.
        activity, queued = scores
        if activity is not None:
            commands.append(RECONCILE.command([index("activity", thread_id)], [thread_id, score_text(activity), ""]))
        if queued is not None:
            commands.append(
                RECONCILE.command([index("queued-threads", thread_id)], [thread_id, score_text(queued), ""])
            )
        if owner_index is not None and listed and listed[0] is not None:
            commands.append(RECONCILE.command([owner_index], [thread_id, as_text(listed[0]), ""]))
        if commands:
            await run_scripts(self._send, commands, [RECONCILE])
