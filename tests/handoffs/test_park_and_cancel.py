"""A child that parks on an approval parks its parent; deciding it resumes both; a cancel cascades."""

from __future__ import annotations

from typing import Any

import pytest

from gateway import Agent, Handoff, ThreadParkedError
from gateway.events import ApprovalRequestedEvent, ApprovalSettledEvent, RunFinishedEvent, ToolStartedEvent
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest

from .conftest import (
    ALICE,
    all_events,
    asks,
    asks_step,
    last_tool_result,
    new_thread,
    purge_tool,
    replying,
    turn,
    until,
)

PURGE = ToolCallRequest(name="purge_cache", args={"key": "sessions:42"})


def ops(executed: list[str]) -> tuple[Agent, Any]:
    return Agent(
        name="ops", description="Runs cache operations.", model=replying(PURGE, text="Purged it.")
    ), purge_tool(executed)


async def parked_pair(runtime: Any, thread: str) -> tuple[str, ApprovalRequestedEvent]:
    run_id = await runtime.start_turn(turn(thread, "purge please"))
    assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
    requested = [e for e in await all_events(runtime, thread) if isinstance(e, ApprovalRequestedEvent)]
    assert len(requested) == 1
    return run_id, requested[0]


async def test_a_child_parked_on_approval_parks_the_parent_and_the_decision_resumes_both(
    make_runtime: Any, any_store: Any
) -> None:
    executed: list[str] = []
    sub, tool = ops(executed)
    main_model = asks("ask_ops", "Purge sessions:42")
    agents = [Agent(name="main", handoffs=["ops"], model=main_model), sub]
    runtime = make_runtime(tools=[tool], agents=agents, store=any_store)
    thread = new_thread()
    run_id, requested = await parked_pair(runtime, thread)
    parent = await runtime.get_run(run_id)
    assert parent.status == "awaiting-approval"
    assert await runtime.store.pending_approvals(thread) == []  # the approval is the child's, on its thread
    approval = await runtime.get_approval(requested.tool_call_id)
    assert approval is not None and approval.thread_id != thread and approval.requester_id == ALICE.id
    assert await runtime.pending_approvals(thread) == [approval]  # ...and listed where the person talks
    ask = next(e for e in await all_events(runtime, thread) if isinstance(e, ToolStartedEvent))
    assert requested.run_id == run_id and requested.parent_tool_call_id == ask.tool_call_id
    assert requested.sub_agent == "ops" and requested.confirmation.title == "Purge sessions:42?"

    await runtime.decide(requested.tool_call_id, ALICE, approve=True, via="web")
    await until(lambda: _status(runtime, run_id, "completed"))
    assert len(executed) == 1
    assert await runtime.pending_approvals(thread) == []
    assert last_tool_result(main_model.requests[-1]) == "Purged it."
    events = await all_events(runtime, thread)
    settled = [e for e in events if isinstance(e, ApprovalSettledEvent)]
    assert [(e.status, e.run_id, e.parent_tool_call_id) for e in settled] == [("approved", run_id, ask.tool_call_id)]
    finished = [e.status for e in events if isinstance(e, RunFinishedEvent) and e.run_id == run_id]
    assert finished == ["awaiting-approval", "completed"]
    assert len(main_model.requests) == 2  # the parent's model was asked once per step, never again


async def _status(runtime: Any, run_id: str, status: str) -> bool:
    return bool((await runtime.get_run(run_id)).status == status)


async def test_a_rejected_child_action_reaches_the_parent_as_its_answer(make_runtime: Any) -> None:
    executed: list[str] = []
    sub, tool = ops(executed)
    main_model = asks("ask_ops", "Purge sessions:42")
    runtime = make_runtime(tools=[tool], agents=[Agent(name="main", handoffs=["ops"], model=main_model), sub])
    thread = new_thread()
    run_id, requested = await parked_pair(runtime, thread)
    await runtime.decide(requested.tool_call_id, ALICE, approve=False, reason="not now", via="web")
    await until(lambda: _status(runtime, run_id, "completed"))
    assert executed == []
    assert last_tool_result(main_model.requests[-1]) == "Purged it."  # ops' scripted reply after the denial


async def test_cancelling_a_parked_parent_cancels_its_parked_child(make_runtime: Any) -> None:
    executed: list[str] = []
    sub, tool = ops(executed)
    main = Agent(name="main", handoffs=["ops"], model=asks("ask_ops", "Purge"))
    runtime = make_runtime(tools=[tool], agents=[main, sub])
    thread = new_thread()
    run_id, requested = await parked_pair(runtime, thread)
    approval = await runtime.get_approval(requested.tool_call_id)
    await runtime.cancel(run_id, ALICE)
    assert (await runtime.get_run(run_id)).status == "cancelled"
    assert (await runtime.get_run(approval.run_id)).status == "cancelled"
    assert (await runtime.get_approval(requested.tool_call_id)).status == "rejected"
    assert executed == []


async def test_cancelling_a_running_parent_cancels_its_running_child(make_runtime: Any) -> None:
    import asyncio

    started = asyncio.Event()

    async def slow(request: Any, index: int) -> ScriptStep:
        started.set()
        await asyncio.sleep(30)
        return ScriptStep(text="late")

    slow_agent = Agent(name="slow", model=ScriptedModel(slow))
    main = Agent(name="main", handoffs=[Handoff("slow")], model=asks("ask_slow", "take your time"))
    runtime = make_runtime(agents=[main, slow_agent])
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "go"))
    await asyncio.wait_for(started.wait(), 5)
    child_id = next(e.tool_call_id for e in await all_events(runtime, thread) if isinstance(e, ToolStartedEvent))
    await runtime.cancel(run_id, ALICE)
    assert await runtime.wait(run_id, timeout=5) == "cancelled"
    assert await runtime.wait(f"run-ask-{child_id}", timeout=5) == "cancelled"


async def test_two_levels_deep_the_grandchilds_lines_nest_twice_and_its_approval_resumes_all(
    make_runtime: Any,
) -> None:
    executed: list[str] = []
    sub, tool = ops(executed)
    billing = Agent(name="billing", handoffs=["ops"], model=asks("ask_ops", "Purge sessions:42", then="Billing done."))
    main = Agent(name="main", handoffs=["billing"], model=asks("ask_billing", "sort out billing", then="All done."))
    runtime = make_runtime(tools=[tool], agents=[main, billing, sub])
    thread = new_thread()
    run_id, requested = await parked_pair(runtime, thread)
    events = await all_events(runtime, thread)
    started = {e.tool: e for e in events if isinstance(e, ToolStartedEvent)}
    assert started["ask_billing"].parent_tool_call_id is None
    assert started["ask_ops"].parent_tool_call_id == started["ask_billing"].tool_call_id
    assert started["ask_ops"].sub_agent == "billing" and started["ask_ops"].run_id == run_id
    assert requested.parent_tool_call_id == started["ask_ops"].tool_call_id and requested.sub_agent == "ops"
    assert [a.tool_call_id for a in await runtime.pending_approvals(thread)] == [requested.tool_call_id]

    await runtime.decide(requested.tool_call_id, ALICE)
    await until(lambda: _status(runtime, run_id, "completed"))
    assert len(executed) == 1
    events = await all_events(runtime, thread)
    assert len([e for e in events if isinstance(e, ApprovalSettledEvent)]) == 1
    assert (await runtime.store.get_messages(thread))[-1].content == "All done."


async def test_a_message_while_the_parent_waits_on_its_child_queues_behind_it(make_runtime: Any) -> None:
    from gateway.models import ModelRequest, UserMessage

    waiting = asks_step("ask_ops", "Purge sessions:42", then="All done.")

    async def main_step(request: ModelRequest, index: int) -> ScriptStep:
        users = [m for m in request.messages if isinstance(m, UserMessage)]
        if users[-1].content == "meanwhile" and request.messages[-1] is users[-1]:
            return ScriptStep(text="Meanwhile, hello.")
        return waiting(request, index)

    executed: list[str] = []
    sub, tool = ops(executed)
    main = Agent(name="main", handoffs=["ops"], model=ScriptedModel(main_step))
    runtime = make_runtime(tools=[tool], agents=[main, sub])
    thread = new_thread()
    run_id, requested = await parked_pair(runtime, thread)
    # Parked on its sub-agent's approval, the thread is parked like any: a new message never
    # settles the approval; it waits behind the run (send) or is refused (start_turn).
    with pytest.raises(ThreadParkedError):
        await runtime.start_turn(turn(thread, "meanwhile"))
    accepted = await runtime.send(turn(thread, "meanwhile"))
    assert accepted.run_id is None and accepted.queued is not None and accepted.position == 1
    await runtime.decide(requested.tool_call_id, ALICE)
    assert await runtime.wait(run_id, timeout=5) == "completed"  # it follows the sub-agent, then the parent
    assert len(executed) == 1
    await until(lambda: _status_of_last(runtime, thread, "completed", 2))
    said = [m.content for m in await runtime.store.get_messages(thread) if not isinstance(m, UserMessage)]
    assert said[-1] == "Meanwhile, hello." and "All done." in said


async def _status_of_last(runtime: Any, thread: str, status: str, count: int) -> bool:
    runs = await runtime.thread_runs(thread)
    return len(runs) == count and runs[-1].status == status
