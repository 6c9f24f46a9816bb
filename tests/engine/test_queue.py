"""The per-thread message queue: send, drain, interrupt, limits, management, approvals that wait."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway import (
    Accepted,
    Agent,
    ApprovalPolicy,
    QueuedMessageNotFoundError,
    QueueFullError,
    ThreadBusyError,
    ThreadForbiddenError,
    ThreadParkedError,
)
from gateway.events import ApprovalRequestedEvent, MessageDequeuedEvent, MessageQueuedEvent
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import MemoryStore, QueuedMessage

from .conftest import ALICE, BOB, all_events, new_thread, purge_tool, turn, until


class Gate:
    """A model whose first run waits for ``release`` (the thread stays busy meanwhile)."""

    def __init__(self, *, refund_on: str | None = None) -> None:
        self.opened = asyncio.Event()
        self.entered = asyncio.Event()
        self.first = True
        self.refund_on = refund_on
        self.model = ScriptedModel(self.step)

    async def step(self, request: ModelRequest, index: int) -> ScriptStep:
        text = request.last_user_text
        if self.first:
            self.first = False
            self.entered.set()
            async with asyncio.timeout(10):
                await self.opened.wait()
        if self.refund_on is not None and text.startswith(self.refund_on) and request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": text})])
        return ScriptStep(text=f"answer to {text}")

    def answered(self) -> list[str]:
        return [r.last_user_text for r in self.model.requests if r.step == 0]


async def settle(runtime: Any, thread: str, count: int) -> list[Any]:
    """Wait until ``count`` runs of the thread ended (completed, cancelled or failed)."""

    async def done() -> bool:
        runs = await runtime.thread_runs(thread)
        return len(runs) >= count and all(r.status in {"completed", "cancelled", "failed"} for r in runs)

    await until(done, timeout=10)
    return list(await runtime.thread_runs(thread))


async def test_a_burst_during_a_run_is_answered_in_order(make_runtime: Any) -> None:
    gate = Gate()
    runtime = make_runtime(model=gate.model)
    thread = new_thread()
    first = await runtime.send(turn(thread, "m0", channel="whatsapp"))
    assert first.run_id and first.queued is None
    await asyncio.wait_for(gate.entered.wait(), 5)
    accepted = [await runtime.send(turn(thread, f"m{n}", channel="whatsapp")) for n in range(1, 5)]
    assert [a.position for a in accepted] == [1, 2, 3, 4]
    assert all(a.run_id is None and a.queued is not None for a in accepted)
    assert [q.turn.text for q in await runtime.queue.messages(thread, ALICE)] == ["m1", "m2", "m3", "m4"]
    gate.opened.set()
    runs = await settle(runtime, thread, 5)
    assert [r.turn.text for r in runs] == ["m0", "m1", "m2", "m3", "m4"]
    assert [r.status for r in runs] == ["completed"] * 5
    assert all(r.turn.channel == "whatsapp" for r in runs)
    assert gate.answered() == ["m0", "m1", "m2", "m3", "m4"]
    events = await all_events(runtime, thread)
    queued = [e for e in events if isinstance(e, MessageQueuedEvent)]
    assert [(e.text, e.position, e.run_id) for e in queued] == [(f"m{n}", n, first.run_id) for n in range(1, 5)]
    # Each queued message left the queue in the batch that began its run, just before run-started.
    for item, run in zip(accepted, runs[1:], strict=True):
        assert item.queued is not None
        at = next(i for i, e in enumerate(events) if isinstance(e, MessageDequeuedEvent) and e.run_id == run.run_id)
        dequeued = events[at]
        assert isinstance(dequeued, MessageDequeuedEvent)
        assert (dequeued.message_id, dequeued.reason) == (item.queued.message_id, "started")
        assert events[at + 1].type == "run-started" and events[at + 1].run_id == run.run_id
    assert await runtime.store.queued_messages(thread) == []


async def test_reject_mode_and_start_turn_refuse_a_busy_thread(make_runtime: Any) -> None:
    gate = Gate()
    runtime = make_runtime(model=gate.model, agents=[Agent(name="strict", queue_mode="reject")])
    thread = new_thread()
    await runtime.send(turn(thread, "m0"))
    await asyncio.wait_for(gate.entered.wait(), 5)
    with pytest.raises(ThreadBusyError):
        await runtime.send(turn(thread, "again"))
    with pytest.raises(ThreadBusyError):
        await runtime.start_turn(turn(thread, "again"))
    queued = await runtime.send(turn(thread, "queued anyway"), mode="queue")
    assert queued.position == 1
    gate.opened.set()
    runs = await settle(runtime, thread, 2)
    assert [r.turn.text for r in runs] == ["m0", "queued anyway"]


async def test_the_queue_limit_refuses_one_more_and_writes_nothing(make_runtime: Any) -> None:
    gate = Gate()
    runtime = make_runtime(model=gate.model, agents=[Agent(name="small", queue_limit=2)])
    thread = new_thread()
    await runtime.send(turn(thread, "m0"))
    await asyncio.wait_for(gate.entered.wait(), 5)
    await runtime.send(turn(thread, "m1"))
    await runtime.send(turn(thread, "m2"))
    before = await runtime.last_seq(thread)
    with pytest.raises(QueueFullError) as refused:
        await runtime.send(turn(thread, "m3"))
    assert refused.value.status == 429 and refused.value.code == "queue_full"
    assert await runtime.last_seq(thread) == before
    gate.opened.set()
    runs = await settle(runtime, thread, 3)
    assert [r.turn.text for r in runs] == ["m0", "m1", "m2"]


async def test_interrupt_stops_the_active_run_and_runs_next(make_runtime: Any) -> None:
    gate = Gate()
    runtime = make_runtime(model=gate.model)
    thread = new_thread()
    first = await runtime.send(turn(thread, "long job"))
    await asyncio.wait_for(gate.entered.wait(), 5)
    waiting = await runtime.send(turn(thread, "waits"))
    urgent = await runtime.send(turn(thread, "stop, do this"), mode="interrupt")
    assert urgent.interrupting and urgent.position == 1
    assert first.run_id is not None
    assert await runtime.wait(first.run_id, timeout=5) == "cancelled"
    runs = await settle(runtime, thread, 3)
    assert [(r.turn.text, r.status) for r in runs] == [
        ("long job", "cancelled"),
        ("stop, do this", "completed"),
        ("waits", "completed"),
    ]
    assert waiting.position == 1


async def test_thanks_during_a_pending_refund_waits_for_the_decision(make_runtime: Any) -> None:
    executed: list[str] = []
    gate = Gate(refund_on="refund")
    gate.first = False  # nothing to hold: the refund parks by itself
    runtime = make_runtime(model=gate.model, tools=[purge_tool(executed)])
    thread = new_thread()
    refund = await runtime.send(turn(thread, "refund order 42"))
    assert refund.run_id and await runtime.wait(refund.run_id, timeout=5) == "awaiting-approval"
    thanks = await runtime.send(turn(thread, "thanks"))
    assert thanks.queued is not None and thanks.position == 1
    with pytest.raises(ThreadParkedError):
        await runtime.start_turn(turn(thread, "a plain start_turn is refused"))
    (pending,) = await runtime.pending_approvals(thread)
    assert pending.status == "pending" and executed == []
    assert [r.status for r in await runtime.thread_runs(thread)] == ["awaiting-approval"]
    await runtime.decide(pending.tool_call_id, ALICE)
    runs = await settle(runtime, thread, 2)
    assert [(r.turn.text, r.status) for r in runs] == [("refund order 42", "completed"), ("thanks", "completed")]
    assert len(executed) == 1
    approval = await runtime.get_approval(pending.tool_call_id)
    assert (approval.status, approval.via) == ("approved", "api")
    # The thanks ran after the resumed refund run had ended.
    events = await all_events(runtime, thread)
    finished = max(e.seq for e in events if e.type == "run-finished" and e.run_id == refund.run_id)
    started = next(e.seq for e in events if isinstance(e, MessageDequeuedEvent))
    assert started > finished


async def test_supersede_keeps_the_first_waves_behaviour(make_runtime: Any) -> None:
    executed: list[str] = []
    gate = Gate(refund_on="refund")
    gate.first = False
    policy = ApprovalPolicy(on_new_message="supersede")
    runtime = make_runtime(model=gate.model, tools=[purge_tool(executed)], approval_policy=policy)
    thread = new_thread()
    refund = await runtime.send(turn(thread, "refund order 42"))
    assert refund.run_id and await runtime.wait(refund.run_id, timeout=5) == "awaiting-approval"
    thanks = await runtime.send(turn(thread, "thanks"))
    assert thanks.run_id is not None and thanks.queued is None
    assert await runtime.wait(thanks.run_id, timeout=5) == "completed"
    requested = next(e for e in await all_events(runtime, thread) if isinstance(e, ApprovalRequestedEvent))
    approval = await runtime.get_approval(requested.tool_call_id)
    assert (approval.status, approval.via) == ("rejected", "superseded")
    assert executed == []


async def test_interrupt_ends_a_parked_run_as_a_cancel_does(make_runtime: Any) -> None:
    executed: list[str] = []
    gate = Gate(refund_on="refund")
    gate.first = False
    runtime = make_runtime(model=gate.model, tools=[purge_tool(executed)])
    thread = new_thread()
    refund = await runtime.send(turn(thread, "refund order 42"))
    assert refund.run_id and await runtime.wait(refund.run_id, timeout=5) == "awaiting-approval"
    urgent = await runtime.send(turn(thread, "no, something else"), mode="interrupt")
    assert urgent.interrupting
    runs = await settle(runtime, thread, 2)
    assert [(r.turn.text, r.status) for r in runs] == [
        ("refund order 42", "cancelled"),
        ("no, something else", "completed"),
    ]
    requested = next(e for e in await all_events(runtime, thread) if isinstance(e, ApprovalRequestedEvent))
    approval = await runtime.get_approval(requested.tool_call_id)
    assert (approval.status, approval.via) == ("rejected", "cancelled")
    assert executed == []


async def test_an_interrupt_agent_still_never_settles_an_approval_by_itself(make_runtime: Any) -> None:
    """An agent whose default mode is ``interrupt``: a "thanks" jumps the queue but the refund stays pending."""
    executed: list[str] = []
    gate = Gate(refund_on="refund")
    gate.first = False
    agent = Agent(name="default", queue_mode="interrupt")
    runtime = make_runtime(model=gate.model, tools=[purge_tool(executed)], agents=[agent])
    thread = new_thread()
    refund = await runtime.send(turn(thread, "refund order 42"))
    assert refund.run_id and await runtime.wait(refund.run_id, timeout=5) == "awaiting-approval"
    thanks = await runtime.send(turn(thread, "thanks"))
    assert thanks.queued is not None and thanks.position == 1 and not thanks.interrupting
    (pending,) = await runtime.pending_approvals(thread)
    assert pending.status == "pending"
    assert [r.status for r in await runtime.thread_runs(thread)] == ["awaiting-approval"]
    await runtime.decide(pending.tool_call_id, ALICE)
    runs = await settle(runtime, thread, 2)
    assert [(r.turn.text, r.status) for r in runs] == [("refund order 42", "completed"), ("thanks", "completed")]
    assert len(executed) == 1


async def test_the_owner_manages_the_queue_and_no_one_else(make_runtime: Any) -> None:
    gate = Gate()
    runtime = make_runtime(model=gate.model)
    thread = new_thread()
    await runtime.send(turn(thread, "m0"))
    await asyncio.wait_for(gate.entered.wait(), 5)
    a, b, c, d = [await runtime.send(turn(thread, f"m{n}")) for n in range(1, 5)]
    assert a.queued and b.queued and c.queued and d.queued
    for call in (
        runtime.queue.messages(thread, BOB),
        runtime.queue.clear(thread, BOB),
        runtime.queue.edit(a.queued.message_id, BOB, "mine"),
        runtime.queue.remove(a.queued.message_id, BOB),
        runtime.queue.interrupt_with(a.queued.message_id, BOB),
    ):
        with pytest.raises(ThreadForbiddenError):
            await call
    with pytest.raises(QueuedMessageNotFoundError):
        await runtime.queue.remove("qm_nope", ALICE)
    assert [q.turn.text for q in await runtime.queue.messages(thread, ALICE)] == ["m1", "m2", "m3", "m4"]

    edited = await runtime.queue.edit(b.queued.message_id, ALICE, "m2 edited")
    assert edited.turn.text == "m2 edited" and edited.turn.actor == ALICE
    removed = await runtime.queue.remove(c.queued.message_id, ALICE)
    assert removed.message_id == c.queued.message_id
    with pytest.raises(QueuedMessageNotFoundError):
        await runtime.queue.remove(c.queued.message_id, ALICE)
    assert [q.turn.text for q in await runtime.queue.messages(thread, ALICE)] == ["m1", "m2 edited", "m4"]
    events = await all_events(runtime, thread)
    assert any(isinstance(e, MessageQueuedEvent) and e.edited and e.text == "m2 edited" for e in events)
    assert any(isinstance(e, MessageDequeuedEvent) and e.reason == "removed" for e in events)

    # "Interrupt with" moves d first and stops the active run: d runs next, then m1, m2 edited.
    await runtime.queue.interrupt_with(d.queued.message_id, ALICE)
    runs = await settle(runtime, thread, 4)
    assert [(r.turn.text, r.status) for r in runs] == [
        ("m0", "cancelled"),
        ("m4", "completed"),
        ("m1", "completed"),
        ("m2 edited", "completed"),
    ]


async def test_clear_empties_the_queue_with_one_event_each(make_runtime: Any) -> None:
    gate = Gate()
    runtime = make_runtime(model=gate.model)
    thread = new_thread()
    await runtime.send(turn(thread, "m0"))
    await asyncio.wait_for(gate.entered.wait(), 5)
    for n in (1, 2):
        await runtime.send(turn(thread, f"m{n}"))
    held = await runtime.queue.clear(thread, ALICE)
    assert [q.turn.text for q in held] == ["m1", "m2"]
    cleared = [e for e in await all_events(runtime, thread) if isinstance(e, MessageDequeuedEvent)]
    assert [(e.message_id, e.reason) for e in cleared] == [(q.message_id, "cleared") for q in held]
    gate.opened.set()
    runs = await settle(runtime, thread, 1)
    assert [r.turn.text for r in runs] == ["m0"]


async def test_the_sweep_drains_a_queue_left_behind_an_idle_thread(make_runtime: Any) -> None:
    runtime = make_runtime(model=ScriptedModel([ScriptStep(text="one"), ScriptStep(text="two")]))
    thread = new_thread()
    first = await runtime.send(turn(thread, "m0"))
    assert first.run_id and await runtime.wait(first.run_id, timeout=5) == "completed"
    # What a process killed between a run's end and its drain leaves: a queue, an idle thread.
    stranded = QueuedMessage(message_id="qm_stranded", thread_id=thread, turn=turn(thread, "left behind"))
    await runtime.store.enqueue_message(stranded, limit=20)
    await runtime.sweep()
    runs = await settle(runtime, thread, 2)
    assert [r.turn.text for r in runs] == ["m0", "left behind"]


def test_accepted_is_a_small_frozen_answer() -> None:
    accepted = Accepted(run_id="run_1")
    assert (accepted.queued, accepted.position, accepted.interrupting) == (None, None, False)
    with pytest.raises(AttributeError):
        accepted.run_id = "other"  # type: ignore[misc]


async def test_the_queue_survives_the_process_that_held_it(any_store: Any) -> None:
    """Process A dies with a run working and two messages queued; B resumes the run, then runs them."""
    from gateway import Runtime

    stuck = asyncio.Event()

    async def hangs(request: ModelRequest, index: int) -> ScriptStep:
        stuck.set()
        await asyncio.Event().wait()  # until the process stops
        raise AssertionError("unreachable")

    async def answers(request: ModelRequest, index: int) -> ScriptStep:
        return ScriptStep(text=f"answer to {request.last_user_text}")

    a = Runtime(model=ScriptedModel(hangs), store=any_store, lease_ttl=0.2, instance_id="A")
    b = Runtime(model=ScriptedModel(answers), store=any_store, lease_ttl=0.2, instance_id="B", takeover_grace=0)
    thread = new_thread()
    try:
        await a.send(turn(thread, "m1"))
        await asyncio.wait_for(stuck.wait(), 5)
        assert (await a.send(turn(thread, "m2"))).position == 1
        assert (await a.send(turn(thread, "m3"))).position == 2
        await a.aclose()  # killed: its lease lapses, nobody drains its queue
        assert [q.turn.text for q in await any_store.queued_messages(thread)] == ["m2", "m3"]
        await b.start()
        runs = await settle(b, thread, 3)
        assert [(r.turn.text, r.status) for r in runs] == [(f"m{n}", "completed") for n in (1, 2, 3)]
        assert await any_store.queued_messages(thread) == []
    finally:
        await a.aclose()
        await b.aclose()


class _RunEndsBeforeEnqueue(MemoryStore):
    """A store where the thread's run ends (and drains an empty queue) just before a message is queued."""

    def __init__(self) -> None:
        super().__init__()
        self.before_enqueue: Any = None

    async def enqueue_message(self, item: QueuedMessage, *, limit: int, first: bool = False) -> int:
        if self.before_enqueue is not None:
            hook, self.before_enqueue = self.before_enqueue, None
            await hook()
        return await super().enqueue_message(item, limit=limit, first=first)


async def test_a_message_that_send_itself_begins_is_answered_as_begun(make_runtime: Any) -> None:
    # The run ends between send's first try and its enqueue: the run's drain found the queue
    # empty, so send's own drain begins the message. Its answer names that run, not a queue
    # place the message already left (a widget would show it "queued" for good).
    gate = Gate()
    store = _RunEndsBeforeEnqueue()
    runtime = make_runtime(model=gate.model, store=store)
    thread = new_thread()
    first = await runtime.send(turn(thread, "m0"))
    assert first.run_id
    await asyncio.wait_for(gate.entered.wait(), 5)

    async def end_the_run() -> None:
        gate.opened.set()
        assert await runtime.wait(first.run_id, timeout=5) == "completed"

    store.before_enqueue = end_the_run
    second = await runtime.send(turn(thread, "m1"))
    runs = await settle(runtime, thread, 2)
    assert [r.turn.text for r in runs] == ["m0", "m1"]
    assert (second.run_id, second.queued, second.position) == (runs[1].run_id, None, None)
