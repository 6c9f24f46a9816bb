"""``RedisQueues``: a ``RedisStore``'s per-thread message queues, and the staff's lists across threads.

A thread's queue is two keys under its hash tag (``P:{t}:queue``, the ids in order, and
``P:{t}:queued``, each message's JSON), changed by one script each; ``APPLY`` reads the head and
dequeues it in the same script that begins the run (``RedisStore.begin_run``). The global keys
(``P:queued:<id>``, ``P:queued-threads:{b}``, ``P:open-approvals:{b}``, ``P:recent-runs:{b}``;
see ``_redis_layout``) are written before or beside the scripts and read as candidates, each
checked against the thread's keys; the cross-thread lists read every bucket at once and merge
them (``RedisPart._merged``).
"""

from __future__ import annotations

import json
import time
from typing import Any

from .._errors import QueueFullError, StoreUnavailableError, ThreadNotFoundError
from ..events import Turn
from ._records import ApprovalRecord, QueuedMessage, RunRecord
from ._redis_batch import Command
from ._redis_layout import as_text, score_text
from ._redis_part import RedisPart, Row, Verdict
from ._redis_scripts import CLEAR_QUEUE, ENQUEUE, QUEUED, REMOVE_QUEUED, UPDATE_QUEUED, run_scripts

__all__ = ["RedisQueues"]

_TRIES = 16
"""Times an edit runs again after finding its message changed by another edit."""


_QUEUED_PAGES = 100
"""Pages of the queued-threads index one ``queued_threads`` call reads at most (past busy threads)."""


class RedisQueues(RedisPart):
    """The queue part of ``RedisStore``: the per-thread queues and the staff's cross-thread lists."""

    def _thread_keys(self, thread_id: str) -> list[str]:
        return [self._keys.thread(thread_id, "queue"), self._keys.thread(thread_id, "queued")]

    async def _thread_of(self, message_id: str) -> str | None:
        raw = await self._send_one("GET", self._keys.queued_index(message_id))
        return as_text(raw) if raw is not None else None

    # -- the queue ----------------------------------------------------------------------------------

    async def enqueue(self, item: QueuedMessage, *, limit: int, first: bool) -> int:
        """Queue ``item``: its id's index and the thread's queue-index entry first, then the script.

        The script and the index entries are on different slots on a Cluster, so they cannot be
        one atomic step; the entries go first (``send_ordered``), so a message queued is always
        found by a drainer (an entry naming an empty queue is dropped by ``queued_threads``). A
        refused message (no thread, queue full) takes its id's index back; the queue entry stays
        for the reader to drop: the thread may hold other messages.
        """
        thread_id = item.thread_id
        keys = [self._keys.thread(thread_id, "thread"), *self._thread_keys(thread_id)]
        args = [item.message_id, item.model_dump_json(), limit, "1" if first else "0"]
        index = self._keys.queued_index(item.message_id)
        entries: list[Command] = [
            ("SET", index, thread_id),
            # A new score every time: a reader that found the queue empty meanwhile leaves it (see the layout).
            ("ZADD", self._keys.index("queued-threads", thread_id), score_text(time.time()), thread_id),
        ]
        async with self._guard():
            written, (reply,) = await self._send_ordered(entries, [ENQUEUE.command(keys, args)])
            for result in [*written, reply]:
                if isinstance(result, Exception):
                    raise result
            position = int(reply)
            if position < 0:
                await self._send_one("DEL", index)
        if position == -1:
            raise ThreadNotFoundError(f"no thread {thread_id!r}")
        if position == -2:
            raise QueueFullError(f"The queue of this conversation holds {limit} messages already")
        return position

    async def queued_messages(self, thread_id: str) -> list[QueuedMessage]:
        """The thread's queue, first first (one script: the ids and their messages together)."""
        async with self._guard():
            items = await QUEUED(self._send_one, self._thread_keys(thread_id), [])
        return [QueuedMessage.model_validate_json(raw) for raw in items if raw is not None]

    async def get_queued(self, message_id: str) -> QueuedMessage | None:
        """A queued message by id, or ``None``."""
        async with self._guard():
            thread_id = await self._thread_of(message_id)
            if thread_id is None:
                return None
            raw = await self._send_one("HGET", self._keys.thread(thread_id, "queued"), message_id)
        return QueuedMessage.model_validate_json(raw) if raw is not None else None

    async def update_queued(self, message_id: str, *, turn: Turn | None, first: bool) -> QueuedMessage | None:
        """Edit and/or move first (compare and set on the message as read; read again when it changed)."""
        async with self._guard():
            thread_id = await self._thread_of(message_id)
            if thread_id is None:
                return None
            keys = self._thread_keys(thread_id)
            for _ in range(_TRIES):
                raw = await self._send_one("HGET", keys[1], message_id)
                if raw is None:
                    return None
                read = as_text(raw)
                item = QueuedMessage.model_validate_json(read)
                if turn is not None:
                    item = item.model_copy(update={"turn": turn})
                written = item.model_dump_json() if turn is not None else read
                done = await UPDATE_QUEUED(self._send_one, keys, [message_id, read, written, "1" if first else "0"])
                if done == 0:
                    return None
                if done == 1:
                    return item
        raise StoreUnavailableError(f"queued message {message_id!r} kept changing during {_TRIES} tries")

    async def remove_queued(self, message_id: str) -> QueuedMessage | None:
        """Take a message out of its queue, and its id out of the index."""
        async with self._guard():
            thread_id = await self._thread_of(message_id)
            if thread_id is None:
                return None
            commands: list[Command] = [
                REMOVE_QUEUED.command(self._thread_keys(thread_id), [message_id]),
                ("DEL", self._keys.queued_index(message_id)),
            ]
            raw = (await run_scripts(self._send, commands, [REMOVE_QUEUED]))[0]
        return QueuedMessage.model_validate_json(raw) if raw is not None else None

    async def clear_queue(self, thread_id: str) -> list[QueuedMessage]:
        """Empty the thread's queue (one script), then drop the ids' index entries."""
        async with self._guard():
            items = await CLEAR_QUEUE(self._send_one, self._thread_keys(thread_id), [])
            held = [QueuedMessage.model_validate_json(raw) for raw in items if raw is not None]
            # One DEL per id: on a Cluster the ids' keys are on different slots.
            await self._send_all([("DEL", self._keys.queued_index(item.message_id)) for item in held])
        return held

    async def queued_threads(self, limit: int) -> list[str]:
        """Threads whose queue holds a message, by when one was last queued (every bucket merged).

        Threads busy (running, or waiting on an approval) stay in the index but are not listed;
        entries naming an empty queue leave it, unless a message was queued since they were read.
        """
        if limit <= 0:
            return []

        def read(key: str, offset: int, count: int) -> Command:
            return ("ZRANGE", key, offset, offset + count - 1, "WITHSCORES")

        async def judge(rows: list[Row]) -> list[Verdict]:
            commands: list[Command] = []
            for _, thread_id, _ in rows:
                commands.append(("LLEN", self._keys.thread(thread_id, "queue")))
                commands.append(("HEXISTS", self._keys.thread(thread_id, "thread"), "running"))
                commands.append(("ZCARD", self._keys.thread(thread_id, "pending")))
            replies = await self._send_all(commands)
            verdicts: list[Verdict] = []
            stale: dict[str, list[Any]] = {}
            for at, (key, thread_id, score) in enumerate(rows):
                length, running, pending = replies[3 * at : 3 * at + 3]
                if not length:
                    stale.setdefault(key, []).extend([thread_id, score_text(score), ""])
                    verdicts.append((False, None))
                elif running or pending:  # busy: stays, and a later pass finds it idle
                    verdicts.append((True, None))
                else:
                    verdicts.append((True, ((score, thread_id), thread_id)))
            await self._reconcile(stale)
            return verdicts

        async with self._guard():
            return await self._merged(
                "queued-threads",
                read,
                judge,
                limit=limit,
                page=max(limit, 100),
                descending=False,
                rounds=_QUEUED_PAGES,
            )

    # -- the staff's lists ------------------------------------------------------------------------

    async def open_approvals(self, before: tuple[float, str] | None, limit: int) -> list[ApprovalRecord]:
        """Pending approvals by ``(requested_ts, tool_call_id)`` descending over every bucket, after ``before``.

        Entries naming an approval that is settled or gone leave the bucket they are in.
        """
        if limit <= 0:
            return []
        top = score_text(before[0]) if before is not None else "+inf"

        def read(key: str, offset: int, count: int) -> Command:
            return ("ZREVRANGEBYSCORE", key, top, "-inf", "WITHSCORES", "LIMIT", offset, count)

        async def judge(rows: list[Row]) -> list[Verdict]:
            verdicts: list[Verdict] = [(True, None)] * len(rows)
            checked: list[tuple[int, str, str]] = []
            for at, (_, member, score) in enumerate(rows):
                call_id, thread_id = json.loads(member)
                # At the cursor's own time, only the ids below its id: the others stay, unread.
                if before is None or (score, call_id) < before:
                    checked.append((at, call_id, thread_id))
            replies = await self._send_all(
                [("HGET", self._keys.thread(thread_id, "approvals"), call_id) for _, call_id, thread_id in checked]
            )
            stale: dict[str, list[str]] = {}
            for (at, call_id, _), raw in zip(checked, replies, strict=True):
                key, member, score = rows[at]
                approval = ApprovalRecord.model_validate_json(raw) if raw is not None else None
                if approval is not None and approval.status == "pending":
                    verdicts[at] = (True, ((score, call_id), approval))
                else:
                    stale.setdefault(key, []).append(member)
                    verdicts[at] = (False, None)
            if stale:
                await self._send_all([("ZREM", key, *members) for key, members in stale.items()])
            return verdicts

        async with self._guard():
            return await self._merged(
                "open-approvals", read, judge, limit=limit, page=limit + 8, descending=True, rounds=16
            )

    async def recent_runs(self, limit: int) -> list[RunRecord]:
        """The newest created runs over every bucket; entries naming an erased run leave their bucket."""
        if limit <= 0:
            return []

        def read(key: str, offset: int, count: int) -> Command:
            return ("ZREVRANGE", key, offset, offset + count - 1, "WITHSCORES")

        async def judge(rows: list[Row]) -> list[Verdict]:
            pairs = [json.loads(member) for _, member, _ in rows]
            replies = await self._send_all(
                [("HGET", self._keys.thread(thread_id, "runs"), run_id) for run_id, thread_id in pairs]
            )
            verdicts: list[Verdict] = []
            stale: dict[str, list[str]] = {}
            for (key, member, score), raw in zip(rows, replies, strict=True):
                if raw is not None:
                    verdicts.append((True, ((score, member), RunRecord.model_validate_json(raw))))
                else:
                    stale.setdefault(key, []).append(member)
                    verdicts.append((False, None))
            if stale:
                await self._send_all([("ZREM", key, *members) for key, members in stale.items()])
            return verdicts

        async with self._guard():
            return await self._merged("recent-runs", read, judge, limit=limit, page=limit, descending=True, rounds=16)
