"""``RedisQueues``: a ``RedisStore``'s per-thread message queues, and the staff's lists across threads.

A thread's queue is two keys under its hash tag (``P:{t}:queue``, the ids in order, and
``P:{t}:queued``, each message's JSON), changed by one script each; ``APPLY`` reads the head and
dequeues it in the same script that begins the run (``RedisStore.begin_run``). The global keys
(``P:queued:<id>``, ``P:queued-threads``, ``P:open-approvals``, ``P:recent-runs``; see
``_redis_layout``) are written beside the scripts and read as candidates, each checked against
the thread's keys.
"""

from __future__ import annotations

import json
import time
from typing import Any, cast

from .._errors import QueueFullError, StoreUnavailableError, ThreadNotFoundError
from ..events import Turn
from ._records import ApprovalRecord, QueuedMessage, RunRecord
from ._redis_batch import Command
from ._redis_layout import as_text, score_text
from ._redis_scripts import CLEAR_QUEUE, ENQUEUE, QUEUED, RECONCILE, REMOVE_QUEUED, UPDATE_QUEUED, run_scripts
from ._redis_threads import RedisPart

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
        """Queue ``item`` in one round trip: the script, its id's index and the queue index beside it."""
        thread_id = item.thread_id
        keys = [self._keys.thread(thread_id, "thread"), *self._thread_keys(thread_id)]
        args = [item.message_id, item.model_dump_json(), limit, "1" if first else "0"]
        index = self._keys.queued_index(item.message_id)
        commands: list[Command] = [
            ENQUEUE.command(keys, args),
            ("SET", index, thread_id),
            # A new score every time: a reader that found the queue empty meanwhile leaves it (see the layout).
            ("ZADD", self._keys.queued_threads, score_text(time.time()), thread_id),
        ]
        async with self._guard():
            position = int((await run_scripts(self._send, commands, [ENQUEUE]))[0])
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
            if held:
                await self._send_one("DEL", *[self._keys.queued_index(item.message_id) for item in held])
        return held

    async def queued_threads(self, limit: int) -> list[str]:
        """Threads whose queue holds a message, by when one was last queued; empty ones leave the index."""
        if limit <= 0:
            return []
        found: list[str] = []
        seen = 0
        page = max(limit, 100)
        async with self._guard():
            for _ in range(_QUEUED_PAGES):
                rows = cast(
                    list[tuple[bytes | str, float]],
                    await self._client.zrange(self._keys.queued_threads, seen, seen + page - 1, withscores=True),
                )
                if not rows:
                    break
                pipe = self._client.pipeline(transaction=False)
                for member, _ in rows:
                    thread_id = as_text(member)
                    pipe.llen(self._keys.thread(thread_id, "queue"))
                    pipe.hexists(self._keys.thread(thread_id, "thread"), "running")
                    pipe.zcard(self._keys.thread(thread_id, "pending"))
                replies = await pipe.execute()
                stale: list[Any] = []
                kept = 0
                for index, (member, score) in enumerate(rows):
                    length, running, pending = replies[3 * index : 3 * index + 3]
                    if not length:
                        stale.extend([as_text(member), score_text(score), ""])
                        continue
                    kept += 1  # busy ones stay in the index: a later pass finds them idle
                    if not running and not pending:
                        found.append(as_text(member))
                seen += kept  # the stale ones leave (or moved, queued again meanwhile)
                if stale:
                    await RECONCILE(self._send_one, [self._keys.queued_threads], stale)
                if len(found) >= limit or len(rows) < page:
                    break
        return found[:limit]

    # -- the staff's lists ------------------------------------------------------------------------

    async def open_approvals(self, before: tuple[float, str] | None, limit: int) -> list[ApprovalRecord]:
        """Pending approvals by ``(requested_ts, tool_call_id)`` descending; settled ones leave the index."""
        if limit <= 0:
            return []
        top = score_text(before[0]) if before is not None else "+inf"
        found: list[ApprovalRecord] = []
        offset = 0
        async with self._guard():
            for _ in range(16):
                want = limit - len(found) + 8
                rows = cast(
                    list[tuple[bytes | str, float]],
                    await self._client.zrevrangebyscore(
                        self._keys.open_approvals, top, "-inf", start=offset, num=want, withscores=True
                    ),
                )
                offset += len(rows)
                candidates = [(json.loads(member), member, score) for member, score in rows]
                if before is not None:  # at the cursor's own time, only the ids below its id
                    candidates = [c for c in candidates if (c[2], c[0][0]) < before]
                candidates.sort(key=lambda c: (c[2], c[0][0]), reverse=True)
                if candidates:
                    pipe = self._client.pipeline(transaction=False)
                    for (call_id, thread_id), _, _ in candidates:
                        pipe.hget(self._keys.thread(thread_id, "approvals"), call_id)
                    stale: list[Any] = []
                    for (_, member, _), raw in zip(candidates, await pipe.execute(), strict=True):
                        approval = ApprovalRecord.model_validate_json(raw) if raw is not None else None
                        if approval is not None and approval.status == "pending":
                            found.append(approval)
                        else:
                            stale.append(member)
                    if stale:
                        offset -= len(stale)
                        await self._client.zrem(self._keys.open_approvals, *stale)
                if len(found) >= limit or len(rows) < want:
                    break
        return found[:limit]

    async def recent_runs(self, limit: int) -> list[RunRecord]:
        """The newest created runs; entries naming an erased run leave the index."""
        if limit <= 0:
            return []
        found: list[RunRecord] = []
        offset = 0
        async with self._guard():
            for _ in range(16):
                want = limit - len(found)
                rows = cast(
                    list[bytes | str],
                    await self._client.zrevrange(self._keys.recent_runs, offset, offset + want - 1),
                )
                offset += len(rows)
                if not rows:
                    break
                pairs = [json.loads(member) for member in rows]
                pipe = self._client.pipeline(transaction=False)
                for run_id, thread_id in pairs:
                    pipe.hget(self._keys.thread(thread_id, "runs"), run_id)
                stale: list[Any] = []
                for member, raw in zip(rows, await pipe.execute(), strict=True):
                    if raw is not None:
                        found.append(RunRecord.model_validate_json(raw))
                    else:
                        stale.append(member)
                if stale:
                    offset -= len(stale)
                    await self._client.zrem(self._keys.recent_runs, *stale)
                if len(found) >= limit or len(rows) < want:
                    break
        return found[:limit]
