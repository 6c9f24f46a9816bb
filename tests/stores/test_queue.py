"""Contract: the per-thread message queue, and the cross-thread lists of staff (every store)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from gateway import (
    QueuedMessageNotFoundError,
    QueueFullError,
    ThreadBusyError,
    ThreadNotFoundError,
    ThreadParkedError,
    Turn,
)
from gateway.events import Attachment, RunStartedEvent
from gateway.stores import Batch, QueuedMessage, Store
from tools import Actor

from ._helpers import approval, begin, finish, new_run, thread_of


def queued(thread_id: str, text: str = "next", actor: str = "u1") -> QueuedMessage:
    turn = Turn(
        thread_id=thread_id,
        actor=Actor(id=actor),
        text=text,
        channel="whatsapp",
        attachments=(Attachment(id="med_1", name="a.png", mime="image/png", size=3),),
    )
    return QueuedMessage(message_id=f"q_{uuid.uuid4().hex}", thread_id=thread_id, turn=turn)


async def begin_queued(store: Store, thread_id: str, message_id: str) -> str:
    run = new_run(thread_id)
    batch = Batch(events=[RunStartedEvent(thread_id=thread_id, run_id=run.run_id, agent="default")])
    await store.begin_run(
        run, thread=thread_of(thread_id), batch=batch, lease_owner="p1", lease_ttl=30.0, dequeue=message_id
    )
    return run.run_id


async def test_messages_queue_in_order_and_read_back_whole(store: Store, thread_id: str) -> None:
    await begin(store, thread_id)
    items = [queued(thread_id, f"m{k}") for k in range(3)]
    positions = [await store.enqueue_message(item, limit=20) for item in items]
    assert positions == [1, 2, 3]
    assert await store.queued_messages(thread_id) == items
    assert await store.get_queued(items[1].message_id) == items[1]
    assert await store.get_queued("q_unknown") is None
    assert thread_id not in await store.queued_threads(limit=1000), "its run still runs: not left behind"


async def test_queued_threads_lists_only_idle_ones_however_many_are_busy(store: Store) -> None:
    """What the sweep must find (a queue behind an idle thread) is never hidden behind busy threads."""
    busy = []
    for k in range(120):  # running, or parked on an approval, each with a message queued first
        thread_id = f"t-{uuid.uuid4().hex[:10]}"
        run, _ = await begin(store, thread_id)
        await store.enqueue_message(queued(thread_id), limit=20)
        if k % 2:
            parked = run.model_copy(update={"status": "awaiting-approval"})
            await store.write(thread_id, Batch(run=parked, approvals=[approval(run)], release=True))
        busy.append(thread_id)
    left = f"t-{uuid.uuid4().hex[:10]}"
    run, _ = await begin(store, left)
    await store.enqueue_message(queued(left), limit=20)
    await finish(store, run)  # its process stopped before draining
    listed = await store.queued_threads(limit=10)
    assert left in listed
    assert not set(listed) & set(busy)


async def test_a_message_cannot_queue_on_a_thread_that_does_not_exist(store: Store, thread_id: str) -> None:
    with pytest.raises(ThreadNotFoundError):
        await store.enqueue_message(queued(thread_id), limit=20)
    assert await store.queued_messages(thread_id) == []


async def test_the_queue_limit_refuses_one_more_and_writes_nothing(store: Store, thread_id: str) -> None:
    await begin(store, thread_id)
    for k in range(2):
        await store.enqueue_message(queued(thread_id, f"m{k}"), limit=2)
    extra = queued(thread_id, "too many")
    with pytest.raises(QueueFullError):
        await store.enqueue_message(extra, limit=2)
    assert [q.turn.text for q in await store.queued_messages(thread_id)] == ["m0", "m1"]
    assert await store.get_queued(extra.message_id) is None


async def test_first_puts_a_message_at_the_head(store: Store, thread_id: str) -> None:
    await begin(store, thread_id)
    a, b = queued(thread_id, "a"), queued(thread_id, "b")
    await store.enqueue_message(a, limit=20)
    assert await store.enqueue_message(b, limit=20, first=True) == 1
    assert [q.message_id for q in await store.queued_messages(thread_id)] == [b.message_id, a.message_id]


async def test_a_thread_with_a_queue_is_busy_for_a_new_run(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    item = queued(thread_id)
    await store.enqueue_message(item, limit=20)
    await finish(store, run)
    with pytest.raises(ThreadBusyError):
        await begin(store, thread_id)
    assert await store.queued_messages(thread_id) == [item]


async def test_dequeue_starts_the_head_atomically_once(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    a, b = queued(thread_id, "a"), queued(thread_id, "b")
    await store.enqueue_message(a, limit=20)
    await store.enqueue_message(b, limit=20)
    with pytest.raises(ThreadBusyError):  # the run still runs
        await begin_queued(store, thread_id, a.message_id)
    await finish(store, run)
    with pytest.raises(QueuedMessageNotFoundError):  # not the head
        await begin_queued(store, thread_id, b.message_id)
    results = await asyncio.gather(
        begin_queued(store, thread_id, a.message_id),
        begin_queued(store, thread_id, a.message_id),
        return_exceptions=True,
    )
    started = [r for r in results if isinstance(r, str)]
    assert len(started) == 1, results
    assert all(isinstance(r, ThreadBusyError | QueuedMessageNotFoundError) for r in results if r not in started)
    assert await store.queued_messages(thread_id) == [b]
    assert await store.get_queued(a.message_id) is None
    stored = await store.get_run(started[0])
    assert stored is not None and stored.status == "running"


async def test_a_parked_thread_keeps_its_queue(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    record = approval(run)
    await store.write(
        thread_id, Batch(run=run.model_copy(update={"status": "awaiting-approval"}), approvals=[record], release=True)
    )
    item = queued(thread_id)
    await store.enqueue_message(item, limit=20)
    with pytest.raises(ThreadParkedError):
        await begin_queued(store, thread_id, item.message_id)
    assert await store.queued_messages(thread_id) == [item]


async def test_edit_move_remove_and_clear(store: Store, thread_id: str) -> None:
    await begin(store, thread_id)
    a, b, c = (queued(thread_id, t) for t in "abc")
    for item in (a, b, c):
        await store.enqueue_message(item, limit=20)
    edited_turn = b.turn.model_copy(update={"text": "b, edited"})
    edited = await store.update_queued(b.message_id, turn=edited_turn)
    assert edited is not None and edited.turn.text == "b, edited" and edited.message_id == b.message_id
    moved = await store.update_queued(c.message_id, first=True)
    assert moved is not None
    assert [q.turn.text for q in await store.queued_messages(thread_id)] == ["c", "a", "b, edited"]
    assert await store.remove_queued(a.message_id) == a
    assert await store.remove_queued(a.message_id) is None
    assert await store.update_queued(a.message_id, first=True) is None
    cleared = await store.clear_queue(thread_id)
    assert [q.turn.text for q in cleared] == ["c", "b, edited"]
    assert await store.queued_messages(thread_id) == []
    assert await store.get_queued(c.message_id) is None
    assert thread_id not in await store.queued_threads()


async def test_erasing_a_thread_erases_its_queue(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    item = queued(thread_id)
    await store.enqueue_message(item, limit=20)
    await finish(store, run)
    assert await store.delete_thread(thread_id)
    assert await store.get_queued(item.message_id) is None
    assert thread_id not in await store.queued_threads()


async def test_open_approvals_lists_pending_ones_of_every_thread_newest_first(store: Store) -> None:
    records = []
    for k in range(5):
        thread_id = f"t-{uuid.uuid4().hex[:10]}"
        run, _ = await begin(store, thread_id)
        record = approval(run).model_copy(update={"requested_ts": 1_000_000.0 + k})
        await store.write(thread_id, Batch(run=run, approvals=[record]))
        records.append(record)
    await store.settle_approval(records[2].tool_call_id, status="approved", decided_by="u1", via="api")
    mine = {r.tool_call_id for r in records}
    listed = [a for a in await store.open_approvals(limit=1000) if a.tool_call_id in mine]
    assert [a.tool_call_id for a in listed] == [records[k].tool_call_id for k in (4, 3, 1, 0)]
    assert listed[0] == records[4]
    first = await store.open_approvals(before=(records[3].requested_ts, records[3].tool_call_id), limit=1000)
    assert [a.tool_call_id for a in first if a.tool_call_id in mine] == [
        records[1].tool_call_id,
        records[0].tool_call_id,
    ]


async def test_recent_runs_lists_the_newest_runs_of_every_thread(store: Store) -> None:
    started = []
    for _ in range(3):
        thread_id = f"t-{uuid.uuid4().hex[:10]}"
        run, _ = await begin(store, thread_id)
        started.append(run.run_id)
        await asyncio.sleep(0.002)  # created_at has millisecond resolution
    recent = [r.run_id for r in await store.recent_runs(limit=1000) if r.run_id in started]
    assert recent == started[::-1]
