"""Lone surrogates from the model, a tool or a turn never poison a thread, on every store.

A lone surrogate (``"\\ud83d"``) is a legal Python ``str`` with no UTF-8 form. Before, a model
answer holding one left the thread unreadable on ``MemoryStore`` and, on Redis, a run that never
ended (each sweep resumed it and asked the model again). Now every text that enters the run is
made valid (U+FFFD), and a step that cannot be stored ends the run ``failed``, once.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from gateway import ModelError, Runtime, Turn
from gateway.events import RunErrorEvent, RunEvent, RunFinishedEvent, ToolCompletedEvent
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import Batch, Store
from tools import Actor, ToolContext, define_tool

BAD = "\ud83d"
FFFD = "\ufffd"


class NoteInput(BaseModel):
    note: str


def utf8(value: Any) -> str:
    """``value`` as UTF-8 JSON: raises when anything in it has no UTF-8 form."""
    text = json.dumps(value, ensure_ascii=False)
    text.encode("utf-8")
    return text


async def read_back(store: Store, thread_id: str) -> tuple[list[RunEvent], str, str]:
    events = await store.read_events(thread_id)
    history = [m.model_dump_json() for m in await store.get_messages(thread_id)]
    return events, utf8([e.model_dump(mode="json") for e in events]), utf8(history)


async def test_a_model_answer_with_a_lone_surrogate_is_stored_with_a_replacement(store: Store, thread_id: str) -> None:
    calls: list[int] = []

    def answer(request: ModelRequest, index: int) -> ScriptStep:
        calls.append(index)
        return ScriptStep(text=f"Sure {BAD} here")

    runtime = Runtime(model=ScriptedModel(answer), store=store)
    try:
        run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=Actor(id="u1"), text="hi"))
        assert await runtime.wait(run_id, timeout=10) == "completed"
    finally:
        await runtime.aclose()
    events, _, history = await read_back(store, thread_id)
    assert [e.text for e in events if e.type == "text-end"] == [f"Sure {FFFD} here"]  # type: ignore[attr-defined]
    assert f"Sure {FFFD} here" in history
    assert calls == [0]


async def test_tool_arguments_output_and_components_with_lone_surrogates_are_made_valid(
    store: Store, thread_id: str
) -> None:
    @define_tool(name="note", description="Keeps a note.", input=NoteInput)
    async def note(input: NoteInput, ctx: ToolContext) -> dict[str, Any]:
        ctx.emit_ui("Callout", {"tone": "info", "text": f"live {BAD}"}, fallback_text=f"fb {BAD}")
        return {"kept": input.note, f"key{BAD}": [f"out {BAD}"]}

    def plan(request: ModelRequest, index: int) -> ScriptStep:
        if request.step == 0:  # arguments as raw JSON text, the way an OpenAI-style model sends them
            return ScriptStep(tool_calls=[ToolCallRequest(name="note", args='{"note": "n \\ud83d"}')])
        return ScriptStep(text="Noted.")

    runtime = Runtime(tools=[note], model=ScriptedModel(plan), store=store)
    try:
        run_id = await runtime.start_turn(
            Turn(thread_id=thread_id, actor=Actor(id="u1"), text=f"note {BAD}", page_context={f"p{BAD}": BAD})
        )
        assert await runtime.wait(run_id, timeout=10) == "completed"
    finally:
        await runtime.aclose()
    events, encoded, history = await read_back(store, thread_id)
    started = next(e for e in events if e.type == "tool-started")
    completed = next(e for e in events if e.type == "tool-completed")
    ui = next(e for e in events if e.type == "ui")
    assert started.input == {"note": f"n {FFFD}"}  # type: ignore[attr-defined]
    assert completed.output == {"kept": f"n {FFFD}", f"key{FFFD}": [f"out {FFFD}"]}  # type: ignore[attr-defined]
    assert ui.props["text"] == f"live {FFFD}" and ui.fallback_text == f"fb {FFFD}"  # type: ignore[attr-defined]
    assert f"note {FFFD}" in history and BAD not in encoded
    run = (await store.thread_runs(thread_id))[0]
    assert run.turn.page_context == {f"p{FFFD}": FFFD}


@pytest.mark.parametrize("refused", ["a tool's result", "the end of a failed model call", "the end of a Stop"])
async def test_a_write_the_store_refuses_fails_the_run_once_and_never_asks_the_model_again(
    store: Store, thread_id: str, monkeypatch: pytest.MonkeyPatch, refused: str
) -> None:
    """A write the store refuses for good (not an outage) ends the run ``failed``, wherever it comes.

    The run's end is written without the refused content, its lease is released (a new turn on
    the thread starts at once), and sweeps never resume it to ask the model again.
    """
    calls: list[int] = []
    in_tool = asyncio.Event()

    @define_tool(name="lookup", description="Looks up.", input=NoteInput)
    async def lookup(input: NoteInput, ctx: ToolContext) -> dict[str, str]:
        if refused == "the end of a Stop" and not in_tool.is_set():
            in_tool.set()
            await asyncio.Event().wait()  # stopped here
        return {"found": "unstorable"}

    def plan(request: ModelRequest, index: int) -> ScriptStep:
        calls.append(index)
        if refused == "the end of a failed model call":
            raise ModelError("the provider answered 400", public="The model refused.")
        if request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="lookup", args={"note": "x"})])
        return ScriptStep(text="Done.")

    real_write = store.write

    def unstorable(event: RunEvent) -> bool:
        match event:
            case ToolCompletedEvent() | RunErrorEvent(code="model_error") | RunFinishedEvent(status="cancelled"):
                return True
        return False

    async def refusing_write(thread: str, batch: Batch) -> list[RunEvent]:
        if any(unstorable(e) for e in batch.events):
            raise ValueError("this value cannot be stored")  # what a serializer raises, not an outage
        return await real_write(thread, batch)

    monkeypatch.setattr(store, "write", refusing_write)
    runtime = Runtime(tools=[lookup], model=ScriptedModel(plan), store=store, lease_ttl=0.3, maintenance_interval=0.05)
    try:
        run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=Actor(id="u1"), text="look"))
        if refused == "the end of a Stop":
            async with asyncio.timeout(10):
                await in_tool.wait()
            await runtime.cancel(run_id, Actor(id="u1"))
        assert await runtime.wait(run_id, timeout=10) == "failed"
        run = await store.get_run(run_id)
        assert run is not None and run.status == "failed"
        assert run.error is not None and run.error["code"] == "store_rejected"
        events = await store.read_events(thread_id)
        assert [e.type for e in events][-2:] == ["run-error", "run-finished"]
        assert len(calls) == 1, "the model was asked once"
        # Nothing is left for a sweep to resume (and ask the model anew): no lease of it lapses,
        # and the thread is free (the run released it), so a new turn starts and ends.
        assert await store.expired_leases() == []
        monkeypatch.setattr(store, "write", real_write)
        again = await runtime.start_turn(Turn(thread_id=thread_id, actor=Actor(id="u1"), text="again"))
        assert await runtime.wait(again, timeout=10) in {"completed", "failed"}
    finally:
        await runtime.aclose()
