"""Personas through the runtime: resolution, the thread's pin, instructions and the tool gate."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from gateway import (
    Agent,
    Handoff,
    Persona,
    PersonaContext,
    PersonaNotFoundError,
    Runtime,
    Turn,
    UnknownAgentError,
)
from gateway.events import RunStartedEvent, ToolFailedEvent
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import MemoryStore, SqliteStore, Store
from tests.conftest import own_redis_store
from tools import Actor, UserError, define_tool

ALICE = Actor(id="alice", roles=["member"])


class Empty(BaseModel):
    pass


@define_tool(name="lookup", description="Look something up.", input=Empty)
async def lookup(input: Empty, ctx: Any) -> dict[str, Any]:
    return {"found": True}


@define_tool(name="refund", description="Refund an order.", input=Empty)
async def refund(input: Empty, ctx: Any) -> dict[str, Any]:
    return {"refunded": True}


def sales_instructions(ctx: PersonaContext) -> str:
    return f"Sell as {ctx.persona} for {ctx.actor.id} on {ctx.channel} (base: {ctx.base_instructions})"


def broken_instructions(ctx: PersonaContext) -> str:
    raise ValueError("no prompt today")


def support_agent(**overrides: Any) -> Agent:
    options: dict[str, Any] = {
        "name": "support",
        "instructions": "You support.",
        "personas": [
            Persona(id="friendly", label="Friendly", instructions="Be warm.", aliases=["warm"]),
            Persona(id="sales", label="Sales", instructions=sales_instructions),
            Persona(id="narrow", label="Lookup only", allowed_tools=["lookup"]),
            Persona(id="broken", label="Broken", instructions=broken_instructions),
        ],
        "default_persona": "friendly",
        **overrides,
    }
    return Agent(**options)


class Recorder:
    """A scripted model that answers with text and keeps what each request said."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest, index: int) -> ScriptStep:
        self.requests.append(request)
        return ScriptStep(text="ok")


def runtime_with(recorder: Any, store: Store | None = None, **agent: Any) -> Runtime:
    return Runtime(
        tools=[lookup, refund],
        agents=[support_agent(**agent), Agent(name="plain")],
        model=ScriptedModel(recorder),
        store=store or MemoryStore(),
    )


def thread() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


async def run_turn(runtime: Runtime, thread_id: str, **turn: Any) -> str:
    run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=ALICE, text="hi", agent="support", **turn))
    status = await runtime.wait(run_id, timeout=10)
    assert status == "completed"
    return run_id


async def test_resolution_order_send_then_pin_then_default() -> None:
    recorder = Recorder()
    async with runtime_with(recorder) as runtime:
        t = thread()
        first = await run_turn(runtime, t)  # nothing named, nothing pinned: the default
        second = await run_turn(runtime, t, persona="sales")  # the send's, which pins it
        third = await run_turn(runtime, t)  # the pin
        fourth = await run_turn(runtime, t, persona="warm")  # an alias: recorded as its id
        fifth = await run_turn(runtime, t)
        runs = [await runtime.get_run(r) for r in (first, second, third, fourth, fifth)]
        assert [r.persona for r in runs] == ["friendly", "sales", "sales", "friendly", "friendly"]
        assert recorder.requests[0].instructions == "Be warm."
        assert recorder.requests[1].instructions == "Sell as sales for alice on api (base: You support.)"
        assert recorder.requests[2].instructions == recorder.requests[1].instructions
        started = [e for e in await runtime.read_events(t) if isinstance(e, RunStartedEvent)]
        assert [e.persona for e in started] == ["friendly", "sales", "sales", "friendly", "friendly"]


async def test_no_persona_keeps_the_agents_instructions() -> None:
    recorder = Recorder()
    async with runtime_with(recorder, default_persona=None) as runtime:
        run_id = await run_turn(runtime, thread())
        assert (await runtime.get_run(run_id)).persona is None
        assert recorder.requests[0].instructions == "You support."


async def test_unknown_persona_is_refused_before_anything_is_written() -> None:
    recorder = Recorder()
    async with runtime_with(recorder) as runtime:
        t = thread()
        with pytest.raises(PersonaNotFoundError) as refused:
            await runtime.send(Turn(thread_id=t, actor=ALICE, text="hi", agent="support", persona="pirate"))
        assert refused.value.status == 400 and refused.value.code == "persona_not_found"
        with pytest.raises(PersonaNotFoundError):
            await runtime.start_turn(Turn(thread_id=t, actor=ALICE, text="hi", agent="plain", persona="friendly"))
        assert await runtime.get_thread(t) is None
        assert await runtime.last_seq(t) == 0
        assert await runtime.persona_pins.get(t, "support") is None
        assert recorder.requests == []


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
async def test_the_pin_outlives_the_process(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A second runtime on the same store (another process) finds the pin; erasure drops it."""

    async def store() -> AsyncIterator[Store]:
        if kind == "sqlite":
            sqlite = SqliteStore(tmp_path / "agora.db")
            yield sqlite
            await sqlite.aclose()
        else:
            async with own_redis_store(request.getfixturevalue("redis_url")) as redis:
                yield redis

    async for shared in store():
        t = thread()
        async with runtime_with(Recorder(), store=shared) as first:
            await run_turn(first, t, persona="sales")
        recorder = Recorder()
        async with runtime_with(recorder, store=shared) as second:
            run_id = await run_turn(second, t)
            assert (await second.get_run(run_id)).persona == "sales"
            assert recorder.requests[0].instructions.startswith("Sell as sales")
            await second.threads.delete(t, ALICE)
            assert await second.persona_pins.get(t, "support") is None


async def test_a_queued_message_keeps_its_persona() -> None:
    gate_requests: list[ModelRequest] = []
    release = asyncio.Event()

    async def slow(request: ModelRequest, index: int) -> ScriptStep:
        gate_requests.append(request)
        if index == 0:
            await asyncio.wait_for(release.wait(), 10)
        return ScriptStep(text="ok")

    async with runtime_with(slow) as runtime:
        t = thread()
        first = await runtime.send(Turn(thread_id=t, actor=ALICE, text="one", agent="support"))
        queued = await runtime.send(Turn(thread_id=t, actor=ALICE, text="two", agent="support", persona="sales"))
        assert queued.queued is not None and queued.queued.turn.persona == "sales"
        release.set()
        assert first.run_id is not None
        await runtime.wait(first.run_id, timeout=10)
        run_id = await runtime.queue.started(t, queued.queued.message_id, 0)
        assert run_id is not None
        await runtime.wait(run_id, timeout=10)
        assert (await runtime.get_run(run_id)).persona == "sales"
        assert gate_requests[-1].instructions.startswith("Sell as sales")


async def test_a_raising_instructions_function_fails_the_run_cleanly(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder()
    async with runtime_with(recorder) as runtime:
        t = thread()
        caplog.set_level(logging.INFO)
        run_id = await runtime.start_turn(Turn(thread_id=t, actor=ALICE, text="hi", agent="support", persona="broken"))
        assert await runtime.wait(run_id, timeout=10) == "failed"
        run = await runtime.get_run(run_id)
        assert run.error == {"code": "persona_failed", "message": "The persona's instructions failed."}
        assert recorder.requests == []  # the model was never asked
        lines = [r for r in caplog.records if "no prompt today" in r.getMessage()]
        assert len(lines) == 1 and lines[0].levelno == logging.ERROR and lines[0].exc_info is None


async def test_allowed_tools_hides_and_refuses() -> None:
    offered: list[list[str]] = []

    def script(request: ModelRequest, index: int) -> ScriptStep:
        offered.append([t.name for t in request.tools])
        if index == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="refund", args={})])
        return ScriptStep(text="done")

    async with runtime_with(script) as runtime:
        t = thread()
        run_id = await run_turn(runtime, t, persona="narrow")
        assert offered[0] == ["lookup"]
        failed = [e for e in await runtime.read_events(t) if isinstance(e, ToolFailedEvent) and e.run_id == run_id]
        assert len(failed) == 1 and failed[0].tool == "refund"
        assert failed[0].error["code"] == "tool_not_found"  # refused as a tool outside the agent's list
        assert "not available to agent" in failed[0].error["message"]
        # Without the persona the agent offers both.
        await run_turn(runtime, t, persona="friendly")
        assert sorted(offered[2]) == ["lookup", "refund"]


async def test_allowed_tools_only_narrow_the_agents_list() -> None:
    offered: list[list[str]] = []

    def script(request: ModelRequest, index: int) -> ScriptStep:
        offered.append([t.name for t in request.tools])
        return ScriptStep(text="done")

    narrow = Persona(id="both", label="Both", allowed_tools=["lookup", "refund"])
    async with runtime_with(script, tools=["refund"], personas=[narrow], default_persona="both") as runtime:
        await run_turn(runtime, thread())
        assert offered == [["refund"]]


async def test_roles_restricted_agent_reads_as_unknown() -> None:
    staff_only = Agent(name="ops", roles=["staff"])
    async with Runtime(agents=[Agent(name="default"), staff_only], model=ScriptedModel([])) as runtime:
        t = thread()
        with pytest.raises(UnknownAgentError) as refused:
            await runtime.send(Turn(thread_id=t, actor=ALICE, text="hi", agent="ops"))
        assert refused.value.status == 404
        with pytest.raises(UnknownAgentError):
            await runtime.start_turn(Turn(thread_id=t, actor=ALICE, text="hi", agent="ops"))
        assert await runtime.get_thread(t) is None
        assert runtime.agent("ops") is staff_only  # the runtime itself still knows it
        staff = Actor(id="sam", roles=["staff"])
        assert runtime.agent_for("ops", staff) is staff_only
        assert [a.name for a in runtime.usable_agents(ALICE)] == ["default"]


@define_tool(name="close_account", description="Close the account.", input=Empty, kind="action")
async def close_account(input: Empty, ctx: Any) -> dict[str, Any]:
    return {"closed": True}


async def test_a_resume_on_another_process_speaks_as_the_run_began(tmp_path: Path) -> None:
    """The persona is the run's (its record), not re-resolved: a pin changed meanwhile does not apply."""
    seen: list[tuple[str, list[str]]] = []

    def script(request: ModelRequest, index: int) -> ScriptStep:
        seen.append((request.instructions, sorted(t.name for t in request.tools)))
        if request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="close_account", args={})])
        return ScriptStep(text="closed")

    closer = Persona(id="closer", label="Closer", instructions="Close firmly.", allowed_tools=["close_account"])

    def make(store: Store) -> Runtime:
        agent = support_agent(personas=[closer, Persona(id="friendly", label="Friendly")])
        return Runtime(tools=[lookup, close_account], agents=[agent], model=ScriptedModel(script), store=store)

    shared = SqliteStore(tmp_path / "agora.db")
    t = thread()
    try:
        async with make(shared) as first:
            run_id = await first.start_turn(
                Turn(thread_id=t, actor=ALICE, text="close it", agent="support", persona="closer")
            )
            assert await first.wait(run_id, timeout=10) == "awaiting-approval"
        async with make(shared) as second:
            await second.persona_pins.pin(t, "support", "friendly")  # as if another send had moved it
            [pending] = await second.pending_approvals(t)
            await second.decide(pending.tool_call_id, ALICE, approve=True)
            assert await second.wait(run_id, timeout=10) == "completed"
            assert (await second.get_run(run_id)).persona == "closer"
    finally:
        await shared.aclose()
    assert seen == [("Close firmly.", ["close_account"]), ("Close firmly.", ["close_account"])]


@pytest.mark.parametrize("bad", ["sales\n", "sales\r", "s\x00", "ü", "x" * 65, ""])
def test_an_id_with_a_trailing_newline_or_other_odd_characters_is_refused(bad: str) -> None:
    # "$" alone matches before a final "\n": ids are matched whole.
    with pytest.raises(UserError, match="must match"):
        Persona(id=bad, label="Sales")
    with pytest.raises(UserError, match="must match"):
        Persona(id="sales", label="Sales", aliases=[bad])
    with pytest.raises(UserError, match="must match"):
        Agent(name=bad)
    with pytest.raises(UserError, match="must match"):
        Handoff(bad)


async def test_a_run_whose_persona_was_removed_while_it_waited_goes_on_with_no_tools(tmp_path: Path) -> None:
    """Fail closed: a resume never widens the tools past what the run's persona allowed."""
    seen: list[list[str]] = []

    def script(request: ModelRequest, index: int) -> ScriptStep:
        seen.append(sorted(t.name for t in request.tools))
        if request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="close_account", args={})])
        if request.step == 1:
            return ScriptStep(tool_calls=[ToolCallRequest(name="lookup", args={})])
        return ScriptStep(text="done")

    closer = Persona(id="closer", label="Closer", allowed_tools=["close_account"])

    def make(store: Store, personas: list[Persona]) -> Runtime:
        agent = support_agent(personas=personas, default_persona=None)
        return Runtime(tools=[lookup, close_account], agents=[agent], model=ScriptedModel(script), store=store)

    shared = SqliteStore(tmp_path / "agora.db")
    t = thread()
    try:
        async with make(shared, [closer]) as first:
            run_id = await first.start_turn(
                Turn(thread_id=t, actor=ALICE, text="close it", agent="support", persona="closer")
            )
            assert await first.wait(run_id, timeout=10) == "awaiting-approval"
        async with make(shared, [Persona(id="friendly", label="Friendly")]) as second:
            [pending] = await second.pending_approvals(t)
            await second.decide(pending.tool_call_id, ALICE, approve=True)
            assert await second.wait(run_id, timeout=10) == "completed"
            events = [e async for e in second.events(t)]
    finally:
        await shared.aclose()
    assert seen == [["close_account"], [], []]
    refused = [e for e in events if isinstance(e, ToolFailedEvent) and e.tool == "lookup"]
    assert len(refused) == 1 and refused[0].error["code"] == "tool_not_found"
