"""Output guards: a step's text is held, guarded whole, then written (or refused)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from gateway import Agent, GuardContext, GuardVerdict, PiiRedactor, Runtime
from gateway.events import RunEvent, Usage
from gateway.models import (
    AssistantMessage,
    ModelChunk,
    ModelRequest,
    ScriptedModel,
    ScriptStep,
    TextChunk,
    ToolCallRequest,
)
from gateway.stores import ModelStepEntry
from tests.engine.conftest import all_events, new_thread, turn, types, weather_tool

from .conftest import Recording

MakeRuntime = Callable[..., Runtime]


class Trickle:
    """A model that streams its text in pieces, 30 ms apart (past the driver's 25 ms write window)."""

    name = "trickle"

    def __init__(self, pieces: list[str]) -> None:
        self.pieces = pieces
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        self.calls += 1
        for piece in self.pieces:
            yield TextChunk(piece)
            await asyncio.sleep(0.03)  # spacing the pieces, not synchronising anything
        yield Usage(model_calls=1)


PIECES = ["Mail me at ", "ana@example.com", " or call ", "+1 (555) 123-4567", "."]


async def test_without_output_guards_the_text_streams_as_it_comes(make_runtime: MakeRuntime) -> None:
    runtime = make_runtime(agents=[Agent(name="a")], model=Trickle(PIECES))
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread))) == "completed"
    deltas = [e for e in await all_events(runtime, thread) if e.type == "text-delta"]
    assert [d.delta for d in deltas] == PIECES


async def test_held_text_is_guarded_whole_before_anything_is_written(make_runtime: MakeRuntime) -> None:
    seen: list[tuple[str, list[str]]] = []
    holder: list[Runtime] = []

    class Peek:
        async def check_output(self, text: str, ctx: GuardContext) -> None:
            written = await holder[0].read_events(ctx.thread_id)
            seen.append((text, types(written)))

    runtime = make_runtime(agents=[Agent(name="a", output_guards=[Peek(), PiiRedactor()])], model=Trickle(PIECES))
    holder.append(runtime)
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread))
    assert await runtime.wait(run_id) == "completed"
    assert seen == [("Mail me at ana@example.com or call +1 (555) 123-4567.", ["run-started"])]
    events = await all_events(runtime, thread)
    assert types(events) == ["run-started", "text-delta", "text-end", "run-finished"]
    said = "Mail me at [email] or call [phone]."
    assert (events[1].delta, events[2].text) == (said, said)
    (step,) = [e for e in await runtime.store.read_journal(thread, run_id) if isinstance(e, ModelStepEntry)]
    assert step.text == said  # a resume replays what the person saw
    history = await runtime.store.get_messages(thread)
    assert history[-1] == AssistantMessage(content=said)


async def test_a_refused_answer_is_never_written_and_the_run_ends_output_refused(make_runtime: MakeRuntime) -> None:
    guard = Recording(GuardVerdict.refuse("promised a refund", message="A person will confirm refunds."))
    model = ScriptedModel([ScriptStep(deltas=["Your refund ", "is approved."])])
    runtime = make_runtime(agents=[Agent(name="a", output_guards=[guard])], model=model)
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "refund?"))
    assert await runtime.wait(run_id) == "failed"
    events = await all_events(runtime, thread)
    assert types(events) == ["run-started", "run-error", "run-finished"]
    assert (events[1].code, events[1].message) == ("output_refused", "A person will confirm refunds.")
    (seen,) = guard.seen
    assert seen[0] == "Your refund is approved."
    assert (seen[1].direction, seen[1].step) == ("output", 0)
    assert [m.role for m in await runtime.store.get_messages(thread)] == ["user"]  # the refused step is not kept
    # Journaled bare, to be charged (it was paid for): neither its text nor any call of it is kept.
    (bare,) = await runtime.store.read_journal(thread, run_id)
    assert isinstance(bare, ModelStepEntry) and (bare.text, bare.calls) == (None, [])


async def test_an_output_guard_sees_each_steps_text_and_a_flag_is_an_event(make_runtime: MakeRuntime) -> None:
    guard = Recording(GuardVerdict.flag("long-winded"))
    model = ScriptedModel(
        [
            ScriptStep(text="Let me look.", tool_calls=[ToolCallRequest(name="get_weather", args={"city": "Porto"})]),
            ScriptStep(text="Sunny in Porto."),
        ]
    )
    runtime = make_runtime(tools=[weather_tool()], agents=[Agent(name="a", output_guards=[guard])], model=model)
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread))) == "completed"
    assert [(text, ctx.step) for text, ctx in guard.seen] == [("Let me look.", 0), ("Sunny in Porto.", 1)]
    events: list[RunEvent] = await all_events(runtime, thread)
    assert types(events) == [
        "run-started",
        "guard-flagged",
        "text-delta",
        "text-end",
        "tool-started",
        "tool-completed",
        "guard-flagged",
        "text-delta",
        "text-end",
        "run-finished",
    ]
    assert {(e.direction, e.guard, e.reason) for e in events if e.type == "guard-flagged"} == {
        ("output", "recording", "long-winded")
    }


async def test_a_raising_output_guard_refuses_generically(make_runtime: MakeRuntime) -> None:
    class Broken:
        async def check_output(self, text: str, ctx: GuardContext) -> Any:
            raise ValueError("no")

    runtime = make_runtime(
        agents=[Agent(name="a", output_guards=[Broken()])], model=ScriptedModel([ScriptStep(text="hi")])
    )
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread))) == "failed"
    error = (await all_events(runtime, thread))[1]
    assert (error.code, error.message) == ("output_refused", "Sorry, I can't share that answer.")


async def test_a_step_of_tool_calls_only_is_not_guarded(make_runtime: MakeRuntime) -> None:
    guard = Recording(GuardVerdict.refuse("everything"))
    model = ScriptedModel([ScriptStep(tool_calls=[ToolCallRequest(name="get_weather", args={"city": "Faro"})])])
    runtime = make_runtime(
        tools=[weather_tool()],
        agents=[Agent(name="a", output_guards=[guard], max_steps=1)],
        model=model,
    )
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread))) == "failed"  # max_steps after the call
    assert guard.seen == []
    assert (await all_events(runtime, thread))[-2].code == "max_steps"
