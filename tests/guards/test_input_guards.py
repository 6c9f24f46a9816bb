"""Input guards: once per turn, before the model; refuse, rewrite, flag; a failing guard refuses."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from gateway import Agent, GuardContext, GuardVerdict, Runtime
from gateway.events import MessageDequeuedEvent
from gateway.models import ScriptedModel, ScriptStep, UserMessage
from tests.engine.conftest import ALICE, all_events, new_thread, turn, types

from .conftest import Recording

MakeRuntime = Callable[..., Runtime]


def answering(text: str = "Sure.") -> ScriptedModel:
    return ScriptedModel(lambda request, index: ScriptStep(text=text))


async def test_a_refusal_ends_the_run_before_the_model_is_called(make_runtime: MakeRuntime) -> None:
    model = answering()
    guard = Recording(GuardVerdict.refuse("abusive", message="Please keep it civil."))
    runtime = make_runtime(agents=[Agent(name="a", input_guards=[guard])], model=model)
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "you are useless"))
    assert await runtime.wait(run_id) == "failed"
    assert model.calls == 0
    events = await all_events(runtime, thread)
    assert types(events) == ["run-started", "run-error", "run-finished"]
    assert (events[1].code, events[1].message) == ("input_refused", "Please keep it civil.")
    # A refused message is kept out of the history: no later turn's model reads it.
    assert await runtime.store.get_messages(thread) == []
    (seen,) = guard.seen
    assert seen[0] == "you are useless"
    assert (seen[1].actor, seen[1].agent, seen[1].thread_id, seen[1].channel) == (ALICE, "a", thread, "api")
    assert (seen[1].direction, seen[1].run_id) == ("input", run_id)
    run = await runtime.get_run(run_id)
    assert run.error == {"code": "input_refused", "message": "Please keep it civil."}


async def test_a_refusal_without_a_message_says_the_gateways_sentence(make_runtime: MakeRuntime) -> None:
    runtime = make_runtime(
        agents=[Agent(name="a", input_guards=[Recording(GuardVerdict.refuse("no"))])], model=answering()
    )
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread, "x"))) == "failed"
    error = (await all_events(runtime, thread))[1]
    assert (error.code, error.message) == ("input_refused", "Sorry, I can't help with that message.")


async def test_the_next_turn_runs_and_its_model_never_reads_the_refused_message(make_runtime: MakeRuntime) -> None:
    model = answering()

    class NoSecrets:
        async def check_input(self, text: str, ctx: GuardContext) -> GuardVerdict | None:
            return GuardVerdict.refuse("secret") if "secret" in text else None

    runtime = make_runtime(agents=[Agent(name="a", input_guards=[NoSecrets()])], model=model)
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread, "the secret is 42"))) == "failed"
    assert await runtime.wait(await runtime.start_turn(turn(thread, "hello"))) == "completed"
    (request,) = model.requests
    assert [m.content for m in request.messages] == ["hello"]


async def test_a_rewrite_is_what_the_model_and_the_history_read(make_runtime: MakeRuntime) -> None:
    model = answering()
    guard = Recording(GuardVerdict.rewrite("a calm question"))
    runtime = make_runtime(agents=[Agent(name="a", input_guards=[guard])], model=model)
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread, "AN ANGRY QUESTION"))) == "completed"
    (request,) = model.requests
    assert request.messages[-1] == UserMessage(content="a calm question")
    history = await runtime.store.get_messages(thread)
    assert history[0] == UserMessage(content="a calm question")
    assert "guard-flagged" not in types(await all_events(runtime, thread))
    assert (await runtime.threads.for_owner(ALICE))[0].title == "a calm question"


async def test_guards_run_in_order_each_on_the_text_the_one_before_left(make_runtime: MakeRuntime) -> None:
    first = Recording(GuardVerdict.rewrite("one"), name="first")
    second = Recording(GuardVerdict.flag("looked odd"), name="second")
    third = Recording(GuardVerdict.refuse("stop"), name="third")
    fourth = Recording(None, name="fourth")
    model = answering()
    agent = Agent(name="a", input_guards=[first, second, third, fourth])
    runtime = make_runtime(agents=[agent], model=model)
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread, "zero"))) == "failed"
    assert [text for text, _ in first.seen + second.seen + third.seen] == ["zero", "one", "one"]
    assert fourth.seen == []  # the first refusal stops them
    events = await all_events(runtime, thread)
    assert types(events) == ["run-started", "guard-flagged", "run-error", "run-finished"]
    flagged = events[1]
    assert (flagged.direction, flagged.guard, flagged.reason) == ("input", "second", "looked odd")
    assert model.calls == 0


async def test_a_flag_lets_the_message_through_with_an_event(make_runtime: MakeRuntime) -> None:
    model = answering("Here you go.")
    runtime = make_runtime(
        agents=[Agent(name="a", input_guards=[Recording(GuardVerdict.flag("mentions a competitor"))])], model=model
    )
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread, "is Acme better?"))) == "completed"
    assert model.requests[0].messages[-1] == UserMessage(content="is Acme better?")
    events = await all_events(runtime, thread)
    assert types(events)[:2] == ["run-started", "guard-flagged"]
    assert events[1].model_dump(include={"direction", "guard", "reason", "run_id"}) == {
        "direction": "input",
        "guard": "recording",
        "reason": "mentions a competitor",
        "run_id": events[0].run_id,
    }


class Raising:
    async def check_input(self, text: str, ctx: GuardContext) -> GuardVerdict:
        raise RuntimeError("the moderation service is down")


class Slow:
    async def check_input(self, text: str, ctx: GuardContext) -> GuardVerdict:
        await asyncio.Event().wait()  # never answers: the timeout refuses
        raise AssertionError("unreachable")


class Wrong:
    async def check_input(self, text: str, ctx: GuardContext) -> Any:
        return "allow"


@pytest.mark.parametrize(
    ("guard", "story"),
    [
        (Raising(), "input guard Raising raised RuntimeError: the moderation service is down; the text is refused"),
        (Slow(), "input guard Slow timed out; the text is refused"),
        (Wrong(), "input guard Wrong raised TypeError: returned str, not a GuardVerdict; the text is refused"),
    ],
    ids=["raises", "times-out", "answers-no-verdict"],
)
async def test_a_failing_guard_refuses_generically_with_one_log_line(
    make_runtime: MakeRuntime, caplog: pytest.LogCaptureFixture, guard: Any, story: str
) -> None:
    model = answering()
    after = Recording(None)
    runtime = make_runtime(agents=[Agent(name="a", input_guards=[guard, after], guard_timeout=0.05)], model=model)
    thread = new_thread()
    with caplog.at_level(logging.INFO):
        assert await runtime.wait(await runtime.start_turn(turn(thread, "hi"))) == "failed"
    assert model.calls == 0 and after.seen == []
    error = (await all_events(runtime, thread))[1]
    assert (error.code, error.message) == ("input_refused", "Sorry, I can't help with that message.")
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [(r.name, r.levelname, r.getMessage()) for r in lines] == [("gateway.guards", "ERROR", story)]
    assert lines[0].exc_info is None and lines[0].exc_text is None


async def test_a_queued_message_is_screened_when_its_run_begins(make_runtime: MakeRuntime) -> None:
    gate = asyncio.Event()

    async def answer(request: Any, index: int) -> ScriptStep:
        if index == 0:
            await gate.wait()
        return ScriptStep(text=f"answer {index}")

    guard = Recording(GuardVerdict.rewrite("[screened]"))
    model = ScriptedModel(answer)
    runtime = make_runtime(agents=[Agent(name="a", input_guards=[guard])], model=model)
    thread = new_thread()
    first = await runtime.send(turn(thread, "first"))
    queued = await runtime.send(turn(thread, "second"))
    assert queued.queued is not None
    asked = len(guard.seen)  # the attempts to begin it on the busy thread asked too: only a begun run counts
    gate.set()
    assert first.run_id is not None and await runtime.wait(first.run_id) == "completed"
    started: str | None = None
    async with asyncio.timeout(5):
        async for event in runtime.subscribe(thread):
            if isinstance(event, MessageDequeuedEvent) and event.reason == "started":
                started = event.run_id
                break
    assert started is not None and await runtime.wait(started) == "completed"
    assert [t for t, _ in guard.seen] == ["first"] + ["second"] * (len(guard.seen) - 1)
    assert len(guard.seen) == asked + 1  # screened again when its run began
    assert [m.content for m in model.requests[1].messages if isinstance(m, UserMessage)] == ["[screened]", "[screened]"]


async def test_a_rewrite_is_validated_as_a_turn_is(make_runtime: MakeRuntime, caplog: pytest.LogCaptureFixture) -> None:
    model = answering()
    runtime = make_runtime(
        agents=[Agent(name="a", input_guards=[Recording(GuardVerdict.rewrite("a\x00b"))])], model=model
    )
    thread = new_thread()
    assert await runtime.wait(await runtime.start_turn(turn(thread, "ab"))) == "completed"
    assert model.requests[0].messages[-1] == UserMessage(content="a\ufffdb")  # as a channel's NUL becomes
    huge = make_runtime(
        agents=[Agent(name="b", input_guards=[Recording(GuardVerdict.rewrite("x" * 40_000))])], model=model
    )
    thread = new_thread()
    with caplog.at_level(logging.ERROR):
        assert await huge.wait(await huge.start_turn(turn(thread, "ab"))) == "failed"
    assert model.calls == 1
    assert [r.getMessage() for r in caplog.records if r.name == "gateway.guards"] == [
        "input guards rewrote the message to 40000 characters, more than a turn holds"
    ]
    assert (await all_events(huge, thread))[1].code == "input_refused"
