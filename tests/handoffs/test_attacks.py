"""Edge cases of handoffs: bad tasks, several handoffs in a step, a cancel two levels deep, answers once."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway import Agent, Handoff, Runtime
from gateway.models import AssistantMessage, ToolCallRequest, ToolMessage
from gateway.stores import MemoryStore

from .conftest import ALICE, asks, new_thread, purge_tool, replying, turn, until
from .test_park_and_cancel import PURGE, _status


async def test_bad_tasks_fail_alone_and_the_good_ones_in_the_same_step_run(make_runtime: Any) -> None:
    calls = [
        ToolCallRequest(name="ask_billing", args={}),
        ToolCallRequest(name="ask_billing", args={"task": 5}),
        ToolCallRequest(name="ask_billing", args={"task": "x" * 40_000}),
        ToolCallRequest(name="ask_billing", args='{"task": '),
        ToolCallRequest(name="ask_billing", args={"task": "ok", "extra": 1}),
        ToolCallRequest(name="ask_billing", args={"task": "bad \ud800 text"}),
        ToolCallRequest(name="ask_billing", args={"task": "again"}),
    ]
    main_model = replying(*calls, text="ok")
    billing = Agent(name="billing", model=replying(text="answer"))
    runtime = make_runtime(agents=[Agent(name="main", handoffs=["billing"], model=main_model), billing])
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "x"))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    results = [m.content for m in main_model.requests[1].messages if isinstance(m, ToolMessage)]
    assert ["invalid_input" in r for r in results] == [True] * 5 + [False, False]
    assert results[5:] == ['"answer"', '"answer"']  # the same handoff twice: two children
    children = [r for r in await runtime.store.recent_runs() if r.parent_run_id == run_id]
    assert sorted(r.turn.text for r in children) == ["again", "bad \ufffd text"]


async def test_two_asks_in_one_step_that_both_park_resume_in_turn(make_runtime: Any) -> None:
    executed: list[str] = []
    ops = Agent(name="ops", model=replying(PURGE, text="Purged."))
    calls = [ToolCallRequest(name="ask_ops", args={"task": t}) for t in ("one", "two")]
    main_model = replying(*calls, text="Both done.")
    runtime = make_runtime(
        tools=[purge_tool(executed)], agents=[Agent(name="main", handoffs=["ops"], model=main_model), ops]
    )
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "go"))
    assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
    (first,) = await runtime.pending_approvals(thread)
    await runtime.decide(first.tool_call_id, ALICE)

    async def second() -> bool:
        found = await runtime.pending_approvals(thread)
        return bool(found) and found[0].tool_call_id != first.tool_call_id

    await until(second)
    (other,) = await runtime.pending_approvals(thread)
    await runtime.decide(other.tool_call_id, ALICE)
    await until(lambda: _status(runtime, run_id, "completed"))
    assert len(executed) == 2 and len(main_model.requests) == 2
    assert [m.content for m in await runtime.store.get_messages(thread)][-3:] == [
        '"Purged."',
        '"Purged."',
        "Both done.",
    ]


async def test_stopping_a_parent_parked_two_levels_deep_leaves_nothing_parked(
    make_runtime: Any, any_store: Any
) -> None:
    executed: list[str] = []
    ops = Agent(name="ops", model=replying(PURGE, text="Purged."))
    billing = Agent(name="billing", handoffs=["ops"], model=asks("ask_ops", "Purge", then="Billing done."))
    main = Agent(name="main", handoffs=["billing"], model=asks("ask_billing", "sort", then="All done."))
    runtime = make_runtime(tools=[purge_tool(executed)], agents=[main, billing, ops], store=any_store)
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "go"))
    assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
    (approval,) = await runtime.pending_approvals(thread)
    await runtime.cancel(run_id, ALICE)
    runs = await runtime.store.recent_runs()
    assert len(runs) == 3 and {r.status for r in runs} == {"cancelled"}
    assert (await runtime.get_approval(approval.tool_call_id)).status == "rejected"
    assert await runtime.pending_approvals(thread) == [] and executed == []
    again = await runtime.start_turn(turn(thread, "again"))  # the thread is free
    assert await runtime.wait(again, timeout=5) == "awaiting-approval"


async def test_a_detached_answer_left_undelivered_is_written_once_by_two_sweeping_processes() -> None:
    store = MemoryStore()
    agents = [
        Agent(
            name="main",
            handoffs=[Handoff("research", detached=True)],
            model=asks("start_research", "dig", then="Started."),
        ),
        Agent(name="research", model=replying(text="Found it.")),
    ]
    first, second, third = (Runtime(agents=agents, store=store) for _ in range(3))
    try:
        first.handoffs.deliver_later = lambda child: None  # type: ignore[method-assign]  # the process stopped there
        thread = new_thread()
        run_id = await first.start_turn(turn(thread, "go"))
        assert await first.wait(run_id, timeout=5) == "completed"
        (child,) = [r for r in await store.recent_runs() if r.parent_run_id == run_id]
        assert await first.wait(child.run_id, timeout=5) == "completed"
        await asyncio.gather(second.sweep(), third.sweep())
        answer = f"{child.run_id}.answer"
        await until(lambda: store.get_run(answer))
        assert await second.wait(answer, timeout=5) == "completed"
        await asyncio.sleep(0.1)  # a second writer would have had its chance
        said = [
            m for m in await store.get_messages(thread) if isinstance(m, AssistantMessage) and m.content == "Found it."
        ]
        assert len(said) == 1
    finally:
        for runtime in (first, second, third):
            await runtime.aclose()
        await store.aclose()
