"""``ask_<agent>``: the sub-agent runs as a child run and its final text is the parent's tool result."""

from __future__ import annotations

from typing import Any

import pytest

from gateway import Agent, Handoff, Persona, Runtime
from gateway.events import ToolCompletedEvent, ToolFailedEvent, ToolStartedEvent
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from tools import UserError

from .conftest import ALICE, all_events, asks, last_tool_result, new_thread, replying, turn, weather_tool


def billing(text: str = "Your balance is 42 EUR.") -> Agent:
    weather = ToolCallRequest(name="get_weather", args={"city": "Oslo"})
    return Agent(name="billing", description="Invoices and balances.", model=replying(weather, text=text))


async def test_the_child_answer_is_the_tool_result_and_its_lines_are_nested(make_runtime: Any) -> None:
    main_model = asks("ask_billing", "What is my balance?")
    main = Agent(name="main", handoffs=["billing"], model=main_model)
    runtime = make_runtime(tools=[weather_tool()], agents=[main, billing()])
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "balance please"))
    assert await runtime.wait(run_id, timeout=5) == "completed"

    offered = {d.name: d for d in main_model.requests[0].tools}
    assert offered["ask_billing"].parameters["required"] == ["task"]
    assert "Invoices and balances." in offered["ask_billing"].description
    assert last_tool_result(main_model.requests[1]) == "Your balance is 42 EUR."
    assert (await runtime.store.get_messages(thread))[-1].content == 'Got: "Your balance is 42 EUR."'

    events = await all_events(runtime, thread)
    ask = next(e for e in events if isinstance(e, ToolStartedEvent) and e.tool == "ask_billing")
    assert ask.running == "Asking billing" and ask.parent_tool_call_id is None
    nested = [e for e in events if getattr(e, "parent_tool_call_id", None) == ask.tool_call_id]
    assert [e.type for e in nested] == ["tool-started", "tool-completed"]
    assert all(e.run_id == run_id and e.sub_agent == "billing" for e in nested)
    assert isinstance(nested[0], ToolStartedEvent) and nested[0].tool == "get_weather"
    done = next(e for e in events if isinstance(e, ToolCompletedEvent) and e.tool_call_id == ask.tool_call_id)
    assert done.output == "Your balance is 42 EUR." and done.done == "billing answered"

    child = await runtime.get_run(f"run-ask-{ask.tool_call_id}")
    assert child.status == "completed" and child.agent == "billing"
    assert (child.parent_run_id, child.parent_thread_id, child.parent_call_id) == (run_id, thread, ask.tool_call_id)
    assert child.depth == 1 and child.turn.actor == ALICE and child.turn.text == "What is my balance?"
    child_thread = await runtime.get_thread(child.thread_id)
    assert child_thread is not None and child_thread.owned_by(ALICE)
    assert child.thread_id == f"{thread}:{ask.tool_call_id}"


async def test_handoffs_are_not_registry_tools(make_runtime: Any) -> None:
    other_model = replying(text="hi")
    main = Agent(name="main", handoffs=["billing", Handoff("research", detached=True)], model=asks("x", "y"))
    other = Agent(name="other", tools="*", model=other_model)
    research = Agent(name="research", model=replying(text="found"))
    runtime = make_runtime(tools=[weather_tool()], agents=[other, main, billing(), research])
    run_id = await runtime.start_turn(turn(new_thread(), "hi"))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    assert [d.name for d in other_model.requests[0].tools] == ["get_weather"]
    assert runtime.registry.get("ask_billing") is None


def test_a_handoff_to_an_agent_not_served_is_refused_at_construction() -> None:
    model = ScriptedModel([])
    with pytest.raises(UserError, match="hands off to 'nobody'"):
        Runtime(agents=[Agent(name="main", handoffs=["nobody"], model=model)])


async def test_a_failed_child_fails_the_call_with_its_reason(make_runtime: Any) -> None:
    main_model = asks("ask_billing", "balance?")
    broken = Agent(name="billing", model=ScriptedModel([ScriptStep(error="provider down")]))
    runtime = make_runtime(agents=[Agent(name="main", handoffs=["billing"], model=main_model), broken])
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "balance"))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    result = last_tool_result(main_model.requests[1])
    assert result["error"]["code"] == "handoff_failed"
    assert "billing did not finish (failed)" in result["error"]["message"]
    failed = [e for e in await all_events(runtime, thread) if isinstance(e, ToolFailedEvent)]
    assert [e.tool for e in failed] == ["ask_billing"]


async def test_bad_task_arguments_fail_the_call(make_runtime: Any) -> None:
    main_model = replying(ToolCallRequest(name="ask_billing", args={"task": ""}), text="ok")
    runtime = make_runtime(agents=[Agent(name="main", handoffs=["billing"], model=main_model), billing()])
    run_id = await runtime.start_turn(turn(new_thread(), "x"))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    assert last_tool_result(main_model.requests[1])["error"]["code"] == "invalid_input"


async def test_a_personas_allowed_tools_narrows_the_handoffs_too(make_runtime: Any) -> None:
    main_model = asks("ask_billing", "What is my balance?")
    personas = [Persona("weather-only", "Weather", allowed_tools=["get_weather"]), Persona("all", "All")]
    main = Agent(name="main", handoffs=["billing"], personas=personas, model=main_model)
    runtime = make_runtime(tools=[weather_tool()], agents=[main, billing()])
    thread = new_thread()
    narrowed = turn(thread, "balance please").model_copy(update={"persona": "weather-only"})
    run_id = await runtime.start_turn(narrowed)
    assert await runtime.wait(run_id, timeout=5) == "completed"

    # Not offered, and the call the model made anyway is refused as an unknown tool: no child ran.
    assert [d.name for d in main_model.requests[0].tools] == ["get_weather"]
    refused = last_tool_result(main_model.requests[1])
    assert refused["error"]["code"] == "tool_not_found"
    assert [r.agent for r in await runtime.thread_runs(thread)] == ["main"]

    other = new_thread()
    run_id = await runtime.start_turn(turn(other, "balance please").model_copy(update={"persona": "all"}))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    assert "ask_billing" in [d.name for d in main_model.requests[2].tools]
