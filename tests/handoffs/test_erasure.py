"""A sub-agent's thread is part of its parent's conversation: not listed apart, erased with it."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway import Agent, Handoff
from gateway.models import ScriptedModel, ScriptStep

from .conftest import ALICE, asks, new_thread, purge_tool, replying, turn
from .test_park_and_cancel import PURGE


async def test_erasing_a_parent_parked_on_its_child_erases_the_child_and_its_approval(
    make_runtime: Any, any_store: Any
) -> None:
    executed: list[str] = []
    ops = Agent(name="ops", model=replying(PURGE, text="Purged it."))
    main = Agent(name="main", handoffs=["ops"], model=asks("ask_ops", "Purge"))
    runtime = make_runtime(tools=[purge_tool(executed)], agents=[main, ops], store=any_store)
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "go"))
    assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
    (approval,) = await runtime.pending_approvals(thread)
    child_thread = approval.thread_id
    assert child_thread != thread and await runtime.get_thread(child_thread) is not None
    assert [t.thread_id for t in await runtime.threads.for_owner(ALICE)] == [thread]  # one conversation

    await runtime.threads.delete(thread, ALICE)
    assert await runtime.get_thread(thread) is None
    assert await runtime.get_thread(child_thread) is None
    assert await runtime.store.get_run(approval.run_id) is None
    assert await runtime.store.get_approval(approval.tool_call_id) is None
    assert await runtime.threads.for_owner(ALICE) == []
    assert executed == []


async def test_erasing_a_parent_stops_and_erases_its_running_detached_child(make_runtime: Any) -> None:
    started = asyncio.Event()

    async def slow(request: Any, index: int) -> ScriptStep:
        started.set()
        await asyncio.sleep(30)
        return ScriptStep(text="late")

    research = Agent(name="research", model=ScriptedModel(slow))
    main = Agent(name="main", handoffs=[Handoff("research", detached=True)], model=asks("start_research", "dig"))
    runtime = make_runtime(agents=[main, research])
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "go"))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    await asyncio.wait_for(started.wait(), 5)
    (child,) = [r for r in await runtime.store.recent_runs() if r.parent_run_id == run_id]
    assert child.status == "running"

    await runtime.threads.delete(thread, ALICE)
    assert await runtime.get_thread(child.thread_id) is None
    assert await runtime.threads.for_owner(ALICE) == []
    await asyncio.sleep(0.05)  # a late answer would have had its chance to bring the parent back
    assert await runtime.get_thread(thread) is None


async def test_the_list_of_conversations_pages_past_child_threads(make_runtime: Any) -> None:
    billing = Agent(name="billing", model=replying(text="42 EUR."))
    main = Agent(name="main", handoffs=["billing"], model=asks("ask_billing", "balance?"))
    runtime = make_runtime(agents=[main, billing])
    threads = [new_thread() for _ in range(3)]
    for thread in threads:
        run_id = await runtime.start_turn(turn(thread, "balance"))
        assert await runtime.wait(run_id, timeout=5) == "completed"
    assert len(await runtime.store.list_threads(ALICE.key, limit=50)) == 6  # each with its child's
    first = await runtime.threads.for_owner(ALICE, limit=2)
    assert [t.thread_id for t in first] == threads[:0:-1]
    last = first[-1]
    rest = await runtime.threads.for_owner(ALICE, before=(last.last_activity_ts, last.thread_id), limit=2)
    assert [t.thread_id for t in rest] == threads[:1]


async def test_retention_erases_a_parent_with_its_children(make_runtime: Any) -> None:
    billing = Agent(name="billing", model=replying(text="42 EUR."))
    main = Agent(name="main", handoffs=["billing"], model=asks("ask_billing", "balance?"))
    runtime = make_runtime(agents=[main, billing], retention_days=1e-12)  # idle once its turn ended
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "balance"))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    assert len(await runtime.store.list_threads(ALICE.key, limit=50)) == 2
    assert await runtime.threads.sweep() == 2  # the child with its parent (or on its own first)
    assert await runtime.store.list_threads(ALICE.key, limit=50) == []
