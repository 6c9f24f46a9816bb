"""Refused handoffs (depth, cycle, roles) reach the model as the call's failure; ``start_`` answers later."""

from __future__ import annotations

from typing import Any

from gateway import MAX_HANDOFF_DEPTH, Agent, Handoff
from gateway.events import RunFinishedEvent, RunStartedEvent, TextEndEvent, ToolCompletedEvent
from gateway.models import AssistantMessage

from .conftest import all_events, asks, last_tool_result, new_thread, replying, turn, until


async def test_a_cycle_is_refused_with_the_reason(make_runtime: Any) -> None:
    billing_model = asks("ask_main", "ask main back")
    main = Agent(name="main", handoffs=["billing"], model=asks("ask_billing", "help"))
    billing = Agent(name="billing", handoffs=["main"], model=billing_model)
    runtime = make_runtime(agents=[main, billing])
    run_id = await runtime.start_turn(turn(new_thread(), "go"))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    refused = last_tool_result(billing_model.requests[-1])
    assert refused["error"]["code"] == "handoff_refused"
    assert "cycle" in refused["error"]["message"] and "main -> billing" in refused["error"]["message"]


async def test_past_the_depth_limit_is_refused(make_runtime: Any) -> None:
    names = [f"a{i}" for i in range(MAX_HANDOFF_DEPTH + 2)]
    models = {name: asks(f"ask_{nxt}", f"pass it on to {nxt}") for name, nxt in zip(names, names[1:], strict=False)}
    agents = [
        Agent(name=n, handoffs=[names[i + 1]] if n in models else [], model=models.get(n) or replying(text="x"))
        for i, n in enumerate(names)
    ]
    runtime = make_runtime(agents=agents)
    run_id = await runtime.start_turn(turn(new_thread(), "go"))
    assert await runtime.wait(run_id, timeout=10) == "completed"
    deepest = names[MAX_HANDOFF_DEPTH]  # runs at depth MAX_HANDOFF_DEPTH: may not hand off again
    refused = last_tool_result(models[deepest].requests[-1])
    assert refused["error"]["code"] == "handoff_refused" and "levels deep" in refused["error"]["message"]
    last = agents[-1].model
    assert last.calls == 0  # the agent past the limit never ran
    for name in names[:MAX_HANDOFF_DEPTH]:
        assert len(models[name].requests) == 2


async def test_an_agent_the_person_may_not_use_is_refused(make_runtime: Any) -> None:
    main_model = asks("ask_admin", "do admin things")
    admin = Agent(name="admin", roles=["staff"], model=replying(text="secret"))
    runtime = make_runtime(agents=[Agent(name="main", handoffs=["admin"], model=main_model), admin])
    run_id = await runtime.start_turn(turn(new_thread(), "go"))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    assert last_tool_result(main_model.requests[-1])["error"]["code"] == "handoff_refused"
    assert admin.model.calls == 0


async def test_start_answers_with_a_receipt_then_later_as_its_own_message(make_runtime: Any, any_store: Any) -> None:
    main_model = asks("start_research", "Find the best cache size", then="I started research on it.")
    research = Agent(name="research", model=replying(text="Findings: 512 MB."))
    main = Agent(name="main", handoffs=[Handoff("research", detached=True)], model=main_model)
    runtime = make_runtime(agents=[main, research], store=any_store)
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "go"))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    receipt = last_tool_result(main_model.requests[1])
    assert receipt["detached"] is True and receipt["status"] == "started" and receipt["agent"] == "research"
    assert receipt["run_id"].startswith("run-start-") and receipt["note"]

    async def answered() -> bool:
        return any(
            isinstance(m, AssistantMessage) and m.content == "Findings: 512 MB."
            for m in await runtime.store.get_messages(thread)
        )

    await until(answered)
    events = await all_events(runtime, thread)
    kinds = [(e.type, e.run_id) for e in events if isinstance(e, RunStartedEvent | RunFinishedEvent | TextEndEvent)]
    answer_run = f"{receipt['run_id']}.answer"
    assert kinds[-3:] == [("run-started", answer_run), ("text-end", answer_run), ("run-finished", answer_run)]
    parent_end = kinds.index(("run-finished", run_id))
    assert parent_end < kinds.index(("run-started", answer_run))  # written once the thread was free
    completed = [e for e in events if isinstance(e, ToolCompletedEvent) and e.tool == "start_research"]
    assert len(completed) == 1 and completed[0].done == "Started research"
    assert (await runtime.get_run(answer_run)).status == "completed"
    assert research.model.calls == 1
    messages = await runtime.store.get_messages(thread)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "assistant"]


async def test_a_detached_childs_approval_is_the_threads_and_its_answer_follows_the_decision(
    make_runtime: Any,
) -> None:
    from gateway.events import ApprovalRequestedEvent
    from gateway.models import ToolCallRequest

    from .conftest import ALICE, purge_tool

    executed: list[str] = []
    purge = ToolCallRequest(name="purge_cache", args={"key": "k1"})
    ops = Agent(name="ops", model=replying(purge, text="Purged k1."))
    main = Agent(
        name="main", handoffs=[Handoff("ops", detached=True)], model=asks("start_ops", "purge k1", then="On it.")
    )
    runtime = make_runtime(tools=[purge_tool(executed)], agents=[main, ops])
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "go"))
    assert await runtime.wait(run_id, timeout=5) == "completed"

    async def requested() -> list[ApprovalRequestedEvent]:
        return [e for e in await all_events(runtime, thread) if isinstance(e, ApprovalRequestedEvent)]

    await until(requested)
    (event,) = await requested()
    assert event.sub_agent == "ops" and event.run_id == run_id
    assert [a.tool_call_id for a in await runtime.pending_approvals(thread)] == [event.tool_call_id]
    await runtime.decide(event.tool_call_id, ALICE)

    async def answered() -> bool:
        return any(m.content == "Purged k1." for m in await runtime.store.get_messages(thread))

    await until(answered)
    assert len(executed) == 1
    assert await runtime.pending_approvals(thread) == []


async def test_a_handoff_the_agent_does_not_have_is_an_unknown_tool(make_runtime: Any) -> None:
    main_model = asks("ask_billing", "help")
    billing = Agent(name="billing", model=replying(text="never"))
    runtime = make_runtime(agents=[Agent(name="main", model=main_model), billing])
    run_id = await runtime.start_turn(turn(new_thread(), "go"))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    assert last_tool_result(main_model.requests[-1])["error"]["code"] == "tool_not_found"
    assert billing.model.calls == 0
