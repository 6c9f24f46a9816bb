"""``TaskBook``: A2A task records in the store's channel state, so any process answers for them.

A task is a run seen through A2A: the record names the run, the thread (``contextId``), the
owner and the caller's messages; the task's state, artifacts and agent messages are read from the
run's events whenever they are needed. Keys (all expire after the book's ``ttl``)::

    a2a:task:{task_id}             the TaskRecord
    a2a:msg:{owner}:{message_id}   the task a caller's messageId started or answered (claim-once)
    a2a:owner:{owner}:{n}          the owner's n-th task id (n = 1, 2, ...; claim-once slots)
    a2a:owner:{owner}:head         the newest slot number, a hint (readers probe past it)

The store offers no lists or compare-and-set, only claim-once keys, so an owner's tasks are an
append-only log of claimed slots: concurrent writers on several processes never lose an entry.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gateway import ChannelState
from gateway.events import now_iso

__all__ = ["DEFAULT_TASK_TTL", "CallerMessage", "TaskBook", "TaskRecord"]

DEFAULT_TASK_TTL = 30 * 24 * 3600.0
"""Seconds a task record (and its messageId claims) is kept after its last change."""


class CallerMessage(BaseModel):
    """A message the caller sent on a task, as A2A 1.0 JSON, with where it fell in the thread."""

    model_config = ConfigDict(extra="forbid")

    after_seq: int
    """The thread's newest ``seq`` when the message arrived: it sorts the task's history."""
    message: dict[str, Any]


class TaskRecord(BaseModel):
    """What the store keeps of one A2A task; the rest is read from the run's events."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    context_id: str
    """The thread id."""
    owner_id: str
    """The actor who started the task; nobody else sees it."""
    run_id: str
    created_at: str = Field(default_factory=now_iso)
    output_modes: list[str] = Field(default_factory=list)
    """The ``acceptedOutputModes`` of the message that started the task."""
    messages: list[CallerMessage] = Field(default_factory=list)


def _hashed(value: str) -> str:
    # Caller-chosen ids go into keys hashed: bounded length, no separators to confuse.
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:32]


class TaskBook:
    """Task records, the owners' task logs and messageId claims, in the channel's state.

    Args:
        store: The store every gateway process shares.
        ttl: Seconds a record is kept after its last change.
    """

    def __init__(self, store: ChannelState, *, ttl: float = DEFAULT_TASK_TTL) -> None:
        self.store = store
        self.ttl = ttl

    @staticmethod
    def _task_key(task_id: str) -> str:
        return f"a2a:task:{_hashed(task_id)}"

    @staticmethod
    def _message_key(owner_id: str, message_id: str) -> str:
        return f"a2a:msg:{_hashed(owner_id)}:{_hashed(message_id)}"

    @staticmethod
    def _slot_key(owner_id: str, slot: int | str) -> str:
        return f"a2a:owner:{_hashed(owner_id)}:{slot}"

    # -- records ------------------------------------------------------------------------------------

    async def get(self, task_id: str) -> TaskRecord | None:
        """The record, or ``None``."""
        raw = await self.store.get(self._task_key(task_id))
        return TaskRecord.model_validate(raw) if raw is not None else None

    async def owned(self, task_id: str, owner_id: str) -> TaskRecord | None:
        """The record when ``owner_id`` owns it; ``None`` for a missing task and for someone else's."""
        record = await self.get(task_id)
        return record if record is not None and record.owner_id == owner_id else None

    async def save(self, record: TaskRecord) -> None:
        """Write the record (and restart its expiry)."""
        await self.store.set(self._task_key(record.task_id), record.model_dump(mode="json"), ttl=self.ttl)

    async def add(self, record: TaskRecord) -> None:
        """Write a new record and append it to its owner's log."""
        await self.save(record)
        head_key = self._slot_key(record.owner_id, "head")
        slot = int(await self.store.get(head_key) or 0)
        while True:
            slot += 1
            if await self.store.claim(self._slot_key(record.owner_id, slot), ttl=self.ttl, value=record.task_id):
                break
        await self.store.set(head_key, slot, ttl=self.ttl)

    # -- messageId claims ---------------------------------------------------------------------------

    async def claim_message(self, owner_id: str, message_id: str, task_id: str) -> str | None:
        """Tie a caller's ``messageId`` to ``task_id``; the task it is already tied to, else ``None``."""
        key = self._message_key(owner_id, message_id)
        if await self.store.claim(key, ttl=self.ttl, value=task_id):
            return None
        existing = await self.store.get(key)
        return str(existing) if existing is not None else None

    async def release_message(self, owner_id: str, message_id: str) -> None:
        """Undo a claim whose message did not take effect."""
        await self.store.delete(self._message_key(owner_id, message_id))

    # -- an owner's tasks ---------------------------------------------------------------------------

    async def newest_slot(self, owner_id: str) -> int:
        """The owner's newest slot number (0 without tasks)."""
        slot = int(await self.store.get(self._slot_key(owner_id, "head")) or 0)
        while await self.store.get(self._slot_key(owner_id, slot + 1)) is not None:
            slot += 1
        return slot

    async def tasks_of(self, owner_id: str, *, before: int | None = None) -> AsyncIterator[tuple[int, TaskRecord]]:
        """The owner's records, newest first, with their slot, from the slot below ``before``.

        Stops at the first expired slot: slots expire oldest first.
        """
        slot = (await self.newest_slot(owner_id)) if before is None else before - 1
        while slot > 0:
            task_id = await self.store.get(self._slot_key(owner_id, slot))
            if task_id is None:
                return
            record = await self.owned(str(task_id), owner_id)
            if record is not None:
                yield slot, record
            slot -= 1
