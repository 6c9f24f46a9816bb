"""The agent loop: steps, read tools, narration, failures fed back to the model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from gateway import Agent, RuntimeObserver, ThreadBusyError, ThreadForbiddenError, UnknownAgentError
from gateway.events import ToolCompletedEvent, ToolFailedEvent, ToolStartedEvent, UiEvent
from gateway.models import AssistantMessage, ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest, ToolMessage
from tools import (
    MetricsView,
    ResultField,
    ToolPresentation,
    ToolRegistry,
    TransientRetry,
    UiComponent,
    UserError,
    define_tool,
)

from .conftest import ALICE, BOB, CityInput, all_events, new_thread, turn, types, weather_tool


async def test_a_read_tool_turn_emits_narrated_events_in_order(make_runtime: Any) -> None:
    model = ScriptedModel(
        [
            ScriptStep(tool_calls=[ToolCallRequest(name="get_weather", args={"city": "Lisbon"})]),
            ScriptStep(text="It is sunny in Lisbon."),
        ]
    )
    runtime = make_runtime(tools=[weather_tool()], model=model)
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "Weather in Lisbon?"))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    events = await all_events(runtime, thread)
    assert types(events) == [
        "run-started", "tool-started", "tool-completed", "text-delta", "text-end", "run-finished",
    ]  # fmt: skip
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    started, completed = events[1], events[2]
    assert isinstance(started, ToolStartedEvent) and isinstance(completed, ToolCompletedEvent)
    assert (started.running, started.label, started.icon, started.input) == (
        "Checking Lisbon", "Weather", "sun", {"city": "Lisbon"},
    )  # fmt: skip
    assert completed.done == "Checked Lisbon" and completed.output == {"city": "Lisbon", "temp": 21}
    assert completed.tool_call_id == started.tool_call_id
    assert events[-2].text == "It is sunny in Lisbon."  # type: ignore[union-attr]
    assert events[-1].status == "completed"  # type: ignore[union-attr]
    # The model's second step saw the tool's result under the runtime's call id.
    second = model.requests[1]
    tool_message = second.messages[-1]
    assert isinstance(tool_message, ToolMessage) and tool_message.tool_call_id == started.tool_call_id
    assert json.loads(tool_message.content) == {"city": "Lisbon", "temp": 21}
    assert [d.name for d in second.tools] == ["get_weather"]


async def test_history_carries_over_between_turns(make_runtime: Any) -> None:
    model = ScriptedModel([ScriptStep(text="Hi Alice."), ScriptStep(text="You said hello.")])
    runtime = make_runtime(model=model, agents=[Agent(name="helper", instructions="Be brief.")])
    thread = new_thread()
    await runtime.wait(await runtime.start_turn(turn(thread, "hello")), timeout=5)
    await runtime.wait(await runtime.start_turn(turn(thread, "what did I say?")), timeout=5)
    request: ModelRequest = model.requests[1]
    assert request.instructions == "Be brief."
    assert [(m.role, getattr(m, "content", None)) for m in request.messages] == [
        ("user", "hello"), ("assistant", "Hi Alice."), ("user", "what did I say?"),
    ]  # fmt: skip


async def test_a_long_thread_shows_the_model_its_newest_messages_from_a_persons_message_on(
    make_runtime: Any,
) -> None:
    def script(request: ModelRequest, index: int) -> ScriptStep:
        if request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="get_weather", args={"city": request.last_user_text})])
        return ScriptStep(text=f"Sunny in {request.last_user_text}.")

    model = ScriptedModel(script)
    agents = [Agent(name="short", history_limit=6), Agent(name="whole", history_limit=None)]
    runtime = make_runtime(tools=[weather_tool()], model=model, agents=agents)
    thread = new_thread()
    for city in ("Lisbon", "Porto", "Braga"):  # four messages a turn: question, call, result, answer
        assert await runtime.wait(await runtime.start_turn(turn(thread, city, agent="short")), timeout=5) == "completed"

    await runtime.wait(await runtime.start_turn(turn(thread, "Faro", agent="short")), timeout=5)
    # The newest six are [answer 2, question 3, call 3, result 3, answer 3, question 4]: the window
    # starts at question 3, so the tool result travels with its call.
    seen = model.requests[-2].messages
    assert [m.role for m in seen] == ["user", "assistant", "tool", "assistant", "user"]
    assert [getattr(m, "content", None) for m in seen[::4]] == ["Braga", "Faro"]
    call, result = seen[1], seen[2]
    assert isinstance(call, AssistantMessage) and isinstance(result, ToolMessage)
    assert result.tool_call_id == call.tool_calls[0].id
    # Within the run the model still sees its own steps after the window.
    assert [m.role for m in model.requests[-1].messages][-3:] == ["user", "assistant", "tool"]

    await runtime.wait(await runtime.start_turn(turn(thread, "Evora", agent="whole")), timeout=5)
    assert len(model.requests[-2].messages) == 4 * 4 + 1


def test_history_limit_must_be_a_positive_int_or_none() -> None:
    assert Agent(name="a", history_limit=None).history_limit is None
    for bad in (0, -1, True, 2.5, "10"):
        with pytest.raises(UserError, match="history_limit"):
            Agent(name="a", history_limit=bad)  # type: ignore[arg-type]


async def test_read_calls_of_one_step_run_concurrently_and_keep_call_order(make_runtime: Any) -> None:
    barrier = asyncio.Barrier(3)
    spans: dict[str, tuple[float, float]] = {}
    loop = asyncio.get_running_loop()

    @define_tool(name="slow_read", description="Waits for its siblings.", input=CityInput)
    async def slow_read(input: CityInput, ctx: Any) -> dict[str, str]:
        start = loop.time()
        async with asyncio.timeout(5):
            await barrier.wait()  # only passes if all three calls are in flight together
        spans[input.city] = (start, loop.time())
        return {"city": input.city}

    calls = [ToolCallRequest(name="slow_read", args={"city": c}) for c in ("A", "B", "C")]
    model = ScriptedModel([ScriptStep(tool_calls=calls), ScriptStep(text="done")])
    runtime = make_runtime(tools=[slow_read], model=model)
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread)), timeout=5) == "completed"
    starts = max(s for s, _ in spans.values())
    ends = min(e for _, e in spans.values())
    assert starts <= ends, "the three calls overlapped in time"
    results = [json.loads(m.content)["city"] for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert results == ["A", "B", "C"]


async def test_unknown_tool_and_bad_arguments_are_failures_the_model_sees(make_runtime: Any) -> None:
    model = ScriptedModel(
        [
            ScriptStep(
                tool_calls=[
                    ToolCallRequest(name="no_such_tool", args={}),
                    ToolCallRequest(name="get_weather", args="{not json"),
                    ToolCallRequest(name="get_weather", args={"town": "Lisbon"}),
                ]
            ),
            ScriptStep(text="Sorry."),
        ]
    )
    calls: list[str] = []
    runtime = make_runtime(tools=[weather_tool(calls)], model=model)
    settled: list[tuple[str, str]] = []

    class Ear(RuntimeObserver):
        def tool_settled(self, run: Any, tool: str, status: str, seconds: float) -> None:
            settled.append((tool, status))

    runtime.observers.append(Ear())
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread)), timeout=5) == "completed"
    failed = [e for e in await all_events(runtime, thread) if isinstance(e, ToolFailedEvent)]
    assert [f.error["code"] for f in failed] == ["tool_not_found", "tool_input_invalid", "tool_input_invalid"]
    # A made-up name never reaches observers (metrics labels): each would be a new series.
    assert settled == [("(unknown)", "failed"), ("get_weather", "failed"), ("get_weather", "failed")]
    assert "city" in failed[2].error["message"]
    assert calls == []
    seen = [json.loads(m.content) for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert [s["error"]["code"] for s in seen] == ["tool_not_found", "tool_input_invalid", "tool_input_invalid"]


async def test_a_tool_that_raises_fails_its_call_and_the_run_goes_on(make_runtime: Any) -> None:
    @define_tool(name="broken", description="Always fails.", input=CityInput)
    async def broken(input: CityInput, ctx: Any) -> None:
        raise ValueError("database said no")

    model = ScriptedModel(
        [ScriptStep(tool_calls=[ToolCallRequest(name="broken", args={"city": "x"})]), ScriptStep(text="It failed.")]
    )
    runtime = make_runtime(tools=[broken], model=model)
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread)), timeout=5) == "completed"
    failed = [e for e in await all_events(runtime, thread) if isinstance(e, ToolFailedEvent)]
    assert failed[0].error == {"code": "tool_error", "message": "ValueError: database said no"}


async def test_tool_timeout_becomes_a_failed_call(make_runtime: Any) -> None:
    never = asyncio.Event()

    @define_tool(name="stuck", description="Never returns.", input=CityInput, timeout=0.05)
    async def stuck(input: CityInput, ctx: Any) -> None:
        await never.wait()

    model = ScriptedModel(
        [ScriptStep(tool_calls=[ToolCallRequest(name="stuck", args={"city": "x"})]), ScriptStep(text="ok")]
    )
    runtime = make_runtime(tools=[stuck], model=model)
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread)), timeout=5) == "completed"
    failed = [e for e in await all_events(runtime, thread) if isinstance(e, ToolFailedEvent)]
    assert failed[0].error["code"] == "tool_timeout"


async def test_transient_errors_are_retried_within_the_call(make_runtime: Any) -> None:
    attempts: list[str] = []

    @define_tool(name="flaky", description="Deadlocks twice.", input=CityInput)
    async def flaky(input: CityInput, ctx: Any) -> dict[str, int]:
        attempts.append(ctx.idempotency_key)
        if len(attempts) < 3:
            raise RuntimeError("Deadlock found when trying to get lock; try restarting transaction")
        return {"ok": 1}

    registry = ToolRegistry([flaky], transient_retry=TransientRetry(backoff=0))
    model = ScriptedModel(
        [ScriptStep(tool_calls=[ToolCallRequest(name="flaky", args={"city": "x"})]), ScriptStep(text="ok")]
    )
    runtime = make_runtime(registry=registry, model=model)
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread)), timeout=5) == "completed"
    assert len(attempts) == 3 and len(set(attempts)) == 1
    assert "tool-completed" in types(await all_events(runtime, thread))


async def test_too_many_steps_ends_the_run_with_a_clear_error(make_runtime: Any) -> None:
    model = ScriptedModel(
        lambda request, i: ScriptStep(tool_calls=[ToolCallRequest(name="get_weather", args={"city": "x"})])
    )
    runtime = make_runtime(tools=[weather_tool()], model=model, agents=[Agent(name="a", max_steps=3)])
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread)), timeout=5) == "failed"
    events = await all_events(runtime, thread)
    assert types(events)[-2:] == ["run-error", "run-finished"]
    assert events[-2].code == "max_steps"  # type: ignore[union-attr]
    assert model.calls == 3


async def test_a_model_error_fails_the_run(make_runtime: Any) -> None:
    runtime = make_runtime(model=ScriptedModel([ScriptStep(error="upstream exploded")]))
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread)), timeout=5) == "failed"
    error = (await all_events(runtime, thread))[-2]
    assert (error.type, error.code, error.message) == ("run-error", "model_error", "upstream exploded")  # type: ignore[union-attr]


async def test_emit_ui_and_present_become_ui_events_and_a_broken_present_is_harmless(make_runtime: Any) -> None:
    @define_tool(
        name="sales",
        description="Sales chart.",
        input=CityInput,
        present=lambda output, ctx: UiComponent("KpiCards", {"items": [{"label": "Total", "value": output["total"]}]}),
        presentation=ToolPresentation(
            result=MetricsView(fields=[ResultField(path="total", label="Total", unit="EUR")])
        ),
    )
    async def sales(input: CityInput, ctx: Any) -> dict[str, int]:
        first = ctx.emit_ui("Chart", {"type": "bar", "series": [], "data": []}, fallback_text="chart")
        ctx.emit_ui("Chart", {"type": "bar", "series": [], "data": [1]}, id=first)
        return {"total": 42}

    def explode(output: Any, ctx: Any) -> None:
        raise RuntimeError("presenter bug")

    @define_tool(name="fragile", description="Present breaks.", input=CityInput, present=explode)
    async def fragile(input: CityInput, ctx: Any) -> dict[str, int]:
        return {"ok": 1}

    model = ScriptedModel(
        [
            ScriptStep(tool_calls=[ToolCallRequest(name="sales", args={"city": "x"})]),
            ScriptStep(tool_calls=[ToolCallRequest(name="fragile", args={"city": "x"})]),
            ScriptStep(text="done"),
        ]
    )
    runtime = make_runtime(tools=[sales, fragile], model=model)
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread)), timeout=5) == "completed"
    events = await all_events(runtime, thread)
    ui = [e for e in events if isinstance(e, UiEvent)]
    assert [(u.component, u.props.get("data")) for u in ui] == [("Chart", []), ("Chart", [1]), ("KpiCards", None)]
    assert ui[0].id == ui[1].id and ui[0].fallback_text == "chart"
    completed = [e for e in events if isinstance(e, ToolCompletedEvent)]
    assert completed[0].result == {"kind": "metrics", "items": [{"label": "Total", "value": "42 EUR"}]}
    assert [c.tool for c in completed] == ["sales", "fragile"]


async def test_thread_ownership_busy_threads_and_unknown_agents(make_runtime: Any) -> None:
    release = asyncio.Event()

    async def script(request: ModelRequest, index: int) -> ScriptStep:
        await release.wait()
        return ScriptStep(text="ok")

    runtime = make_runtime(model=ScriptedModel(script))
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread))
    with pytest.raises(ThreadBusyError):
        await runtime.start_turn(turn(thread))
    with pytest.raises(ThreadForbiddenError):
        await runtime.start_turn(turn(thread, actor=BOB))
    with pytest.raises(UnknownAgentError):
        await runtime.start_turn(turn(new_thread(), agent="nobody"))
    release.set()
    assert await runtime.wait(run_id, timeout=5) == "completed"
    runs = await runtime.store.thread_runs(thread)
    assert [r.run_id for r in runs] == [run_id]
    with pytest.raises(ThreadForbiddenError):
        await runtime.check_thread_access(thread, BOB)
    assert (await runtime.check_thread_access(thread, ALICE)).owner_id == "alice"


async def test_agent_allow_list_limits_the_tools_offered(make_runtime: Any) -> None:
    class Empty(BaseModel):
        pass

    @define_tool(name="other", description="Another tool.", input=Empty)
    async def other(input: Empty, ctx: Any) -> int:
        return 1

    model = ScriptedModel([ScriptStep(tool_calls=[ToolCallRequest(name="other")]), ScriptStep(text="ok")])
    runtime = make_runtime(tools=[weather_tool(), other], model=model, agents=[Agent(name="w", tools=["get_weather"])])
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread)), timeout=5) == "completed"
    assert [d.name for d in model.requests[0].tools] == ["get_weather"]
    failed = [e for e in await all_events(runtime, thread) if isinstance(e, ToolFailedEvent)]
    assert failed[0].error["code"] == "tool_not_found"


async def test_live_events_follow_a_running_turn(make_runtime: Any) -> None:
    gate = asyncio.Event()

    async def script(request: ModelRequest, index: int) -> ScriptStep:
        await gate.wait()
        return ScriptStep(deltas=["Hel", "lo"])

    runtime = make_runtime(model=ScriptedModel(script))
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread))
    seen: list[str] = []

    async def follow() -> None:
        async for event in runtime.events(thread, follow=True):
            seen.append(event.type)
            if event.type == "run-started":
                gate.set()
            if event.type == "run-finished":
                return

    async with asyncio.timeout(5):
        await follow()
    assert seen == ["run-started", "text-delta", "text-delta", "text-end", "run-finished"]
    assert await runtime.wait(run_id) == "completed"


async def test_usage_is_summed_over_steps(make_runtime: Any) -> None:
    from gateway.events import Usage

    model = ScriptedModel(
        [
            ScriptStep(
                tool_calls=[ToolCallRequest(name="get_weather", args={"city": "x"})],
                usage=Usage(input_tokens=10, output_tokens=2, model_calls=1),
            ),
            ScriptStep(text="ok", usage=Usage(input_tokens=15, output_tokens=3, model_calls=1)),
        ]
    )
    runtime = make_runtime(tools=[weather_tool()], model=model)
    thread = new_thread()
    await runtime.wait(await runtime.start_turn(turn(thread)), timeout=5)
    finished = (await all_events(runtime, thread))[-1]
    assert finished.usage == Usage(input_tokens=25, output_tokens=5, model_calls=2)  # type: ignore[union-attr]


async def test_a_sync_tool_runs_in_a_thread_and_its_components_still_arrive(make_runtime: Any) -> None:
    import threading

    threads: list[int] = []

    @define_tool(name="blocking", description="A sync tool (a blocking driver).", input=CityInput)
    def blocking(input: CityInput, ctx: Any) -> dict[str, str]:
        threads.append(threading.get_ident())
        ctx.emit_ui("Callout", {"tone": "info", "text": f"from a thread: {input.city}"})
        return {"city": input.city}

    model = ScriptedModel(
        [ScriptStep(tool_calls=[ToolCallRequest(name="blocking", args={"city": "x"})]), ScriptStep(text="ok")]
    )
    runtime = make_runtime(tools=[blocking], model=model)
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread)), timeout=5) == "completed"
    assert threads and threads[0] != threading.get_ident()
    events = await all_events(runtime, thread)
    ui = [e for e in events if isinstance(e, UiEvent)]
    assert [u.props["text"] for u in ui] == ["from a thread: x"]
    assert types(events).index("ui") < types(events).index("tool-completed")


async def test_observers_hear_every_written_event_once(make_runtime: Any) -> None:
    from gateway import RuntimeObserver

    heard: list[int] = []

    class Ear(RuntimeObserver):
        def events_written(self, thread_id: str, events: list[Any]) -> None:
            heard.extend(e.seq for e in events)

    model = ScriptedModel(
        [ScriptStep(tool_calls=[ToolCallRequest(name="get_weather", args={"city": "x"})]), ScriptStep(text="ok")]
    )
    runtime = make_runtime(tools=[weather_tool()], model=model)
    runtime.observers.append(Ear())
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread)), timeout=5) == "completed"
    assert heard == [e.seq for e in await all_events(runtime, thread)]


async def test_present_gets_what_execute_returned_and_events_get_its_json(make_runtime: Any) -> None:
    class Forecast(BaseModel):
        city: str
        temp: float

    def present(output: Forecast, ctx: Any) -> UiComponent:
        # An attribute, not a key: present sees the model itself.
        return UiComponent(component="KpiCards", props={"items": [{"label": output.city, "value": output.temp}]})

    @define_tool(name="forecast", description="Forecast.", input=CityInput, present=present)
    async def forecast(input: CityInput, ctx: Any) -> Forecast:
        return Forecast(city=input.city, temp=21.5)

    model = ScriptedModel(
        [ScriptStep(tool_calls=[ToolCallRequest(name="forecast", args={"city": "Faro"})]), ScriptStep(text="ok")]
    )
    runtime = make_runtime(tools=[forecast], model=model)
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread)), timeout=5) == "completed"
    events = await all_events(runtime, thread)
    (ui,) = [e for e in events if isinstance(e, UiEvent)]
    assert ui.props == {"items": [{"label": "Faro", "value": 21.5}]}
    (done,) = [e for e in events if isinstance(e, ToolCompletedEvent)]
    assert done.output == {"city": "Faro", "temp": 21.5}
