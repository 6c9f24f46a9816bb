"""Records and batches the store tests build."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from gateway import Turn
from gateway.events import RunEvent, RunStartedEvent, TextDeltaEvent
from gateway.stores import (
    ApprovalRecord,
    Batch,
    MemoryStore,
    PostgresStore,
    RedisStore,
    RunRecord,
    SqliteStore,
    Store,
    ThreadRecord,
)
from tools import Actor, Confirmation


def new_run(thread_id: str, actor: str = "u1") -> RunRecord:
    return RunRecord(
        run_id=f"run_{uuid.uuid4().hex}",
        thread_id=thread_id,
        agent="default",
        turn=Turn(thread_id=thread_id, actor=Actor(id=actor), text="hello", page_context={"status": "x"}),
    )


def thread_of(thread_id: str, owner: str = "u1") -> ThreadRecord:
    return ThreadRecord(thread_id=thread_id, owner_id=owner, channel="web")


def delta(run: RunRecord, text: str = "x") -> TextDeltaEvent:
    return TextDeltaEvent(thread_id=run.thread_id, run_id=run.run_id, message_id="m1", delta=text)


async def begin(
    store: Store,
    thread_id: str,
    *,
    owner: str = "u1",
    lease_owner: str = "p1",
    ttl: float = 30.0,
    batch: Batch | None = None,
) -> tuple[RunRecord, list[RunEvent]]:
    run = new_run(thread_id, owner)
    if batch is None:
        batch = Batch(events=[RunStartedEvent(thread_id=thread_id, run_id=run.run_id, agent="default")])
    begun = await store.begin_run(
        run, thread=thread_of(thread_id, owner), batch=batch, lease_owner=lease_owner, lease_ttl=ttl
    )
    events = begun.events
    stored = await store.get_run(run.run_id)
    assert stored is not None
    return stored, events


async def finish(store: Store, run: RunRecord, status: Any = "completed") -> RunRecord:
    run = run.model_copy(update={"status": status})
    await store.write(run.thread_id, Batch(run=run, release=True))
    return run


def approval(run: RunRecord, *, expires_in: float = 3600.0, tool: str = "purge_cache") -> ApprovalRecord:
    expires = time.time() + expires_in
    return ApprovalRecord(
        tool_call_id=f"tc_{uuid.uuid4().hex}",
        run_id=run.run_id,
        thread_id=run.thread_id,
        tool=tool,
        input={"key": "cache:42", "nested": {"empty": {}, "list": [1, 2.5, None]}},
        requester_id=run.actor.id,
        confirmation=Confirmation(title="Purge cache:42?", verb="Purge", detail=None),
        tone="destructive",
        expires_at=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(expires)),
        expires_ts=expires,
    )


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    """Poll ``check`` until it holds; the watchdog fails the test after ``timeout`` seconds.

    The deadline is also checked by hand: on Python 3.11 redis-py's use of ``asyncio.wait_for`` can
    swallow the cancellation by which ``asyncio.timeout`` fires.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with asyncio.timeout(timeout):
        while not await check():
            if loop.time() > deadline:
                raise TimeoutError(f"condition not met within {timeout} s")
            await asyncio.sleep(0.01)


async def collect(stream: AsyncIterator[RunEvent], count: int, out: list[RunEvent] | None = None) -> list[RunEvent]:
    """Take ``count`` events from a subscription (into ``out`` as they come)."""
    out = [] if out is None else out
    async for event in stream:
        out.append(event)
        if len(out) >= count:
            break
    return out


def live_subscribers(store: Store, thread_id: str) -> int:
    """How many live tails of the thread the store holds."""
    if isinstance(store, RedisStore):
        return store.hub.subscribers(store.channel(thread_id))
    if isinstance(store, SqliteStore | PostgresStore):
        return store.followers.count(thread_id)
    assert isinstance(store, MemoryStore)
    state = store._threads.get(thread_id)
    waiting = store._waiting_subscribers.get(thread_id, set())
    return len(state.subscribers if state else set()) + len(waiting)
