"""End to end: the real runtime driving runs on ``RedisStore``, across two "processes"."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel

from gateway import Runtime, Turn
from gateway.events import RunEvent
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import RedisStore
from tools import Actor, ToolContext, define_tool

from ._helpers import eventually
from .conftest import drop_prefix

pytestmark = pytest.mark.redis


class CityInput(BaseModel):
    city: str


class KeyInput(BaseModel):
    key: str


@define_tool(name="get_weather", description="Weather", input=CityInput)
async def get_weather(input: CityInput, ctx: ToolContext) -> dict[str, int]:
    return {"temp": 21}


@define_tool(name="purge_cache", description="Purge one cache key", input=KeyInput, kind="action")
async def purge_cache(input: KeyInput, ctx: ToolContext) -> dict[str, str]:
    return {"purged": input.key}


def purge_then_answer(request: ModelRequest, index: int) -> ScriptStep:
    if request.step == 0:
        return ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": "cache:42"})])
    return ScriptStep(text="Purged.")


@pytest.fixture
async def shared(redis_url: str, prefix: str) -> AsyncIterator[tuple[RedisStore, RedisStore]]:
    """Two stores on one Redis and one prefix: what two gateway processes share."""
    first, second = RedisStore(redis_url, prefix=prefix), RedisStore(redis_url, prefix=prefix)
    try:
        yield first, second
    finally:
        await first.aclose()
        await second.aclose()
        await drop_prefix(redis_url, prefix)


async def test_a_turn_with_a_read_tool_completes_and_its_events_come_back_in_order(
    shared: tuple[RedisStore, RedisStore],
) -> None:
    store, _ = shared
    model = ScriptedModel(
        [
            ScriptStep(tool_calls=[ToolCallRequest(name="get_weather", args={"city": "Lisbon"})]),
            ScriptStep(text="Sunny.", deltas=["Sun", "ny."]),
        ]
    )
    runtime = Runtime(tools=[get_weather], model=model, store=store)
    thread_id = f"t-{uuid.uuid4().hex[:8]}"
    try:
        run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=Actor(id="u1"), text="Weather?"))
        assert await runtime.wait(run_id, timeout=10) == "completed"
        events = [event async for event in runtime.events(thread_id)]
    finally:
        await runtime.aclose()

    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    kinds = [e.type for e in events]
    assert kinds[:3] == ["run-started", "tool-started", "tool-completed"]
    assert kinds[-2:] == ["text-end", "run-finished"]
    assert events[2].output == {"temp": 21}  # type: ignore[union-attr]
    assert events[-1].status == "completed"  # type: ignore[union-attr]
    run = await store.get_run(run_id)
    assert run is not None and run.status == "completed"
    history = await store.get_messages(thread_id)
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]


async def test_an_approval_decided_on_another_process_resumes_the_run(shared: tuple[RedisStore, RedisStore]) -> None:
    store_a, store_b = shared
    runtime_a = Runtime(tools=[purge_cache], model=ScriptedModel(purge_then_answer), store=store_a)
    runtime_b = Runtime(tools=[purge_cache], model=ScriptedModel(purge_then_answer), store=store_b)
    thread_id = f"t-{uuid.uuid4().hex[:8]}"
    actor = Actor(id="u1")
    seen: list[RunEvent] = []

    async def watch() -> None:
        async for event in runtime_a.events(thread_id, follow=True):
            seen.append(event)
            if event.type == "run-finished" and event.status == "completed":
                return

    try:
        run_id = await runtime_a.start_turn(Turn(thread_id=thread_id, actor=actor, text="Purge cache:42"))
        watcher = asyncio.create_task(watch())
        assert await runtime_a.wait(run_id, timeout=10) == "awaiting-approval"
        (pending,) = await runtime_b.pending_approvals(thread_id)

        await runtime_b.decide(pending.tool_call_id, actor, approve=True, via="whatsapp")
        assert await runtime_b.wait(run_id, timeout=10) == "completed"
        async with asyncio.timeout(10):
            await watcher
    finally:
        await runtime_a.aclose()
        await runtime_b.aclose()

    kinds = [e.type for e in seen]
    assert kinds.index("approval-requested") < kinds.index("approval-settled") < kinds.index("tool-completed")
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
    assert kinds.count("run-finished") == 2  # parked, then completed


async def test_a_run_whose_process_died_is_resumed_elsewhere(shared: tuple[RedisStore, RedisStore]) -> None:
    store_a, store_b = shared
    started, release = asyncio.Event(), asyncio.Event()
    calls = 0

    @define_tool(name="slow_lookup", description="Slow", input=CityInput)
    async def slow_lookup(input: CityInput, ctx: ToolContext) -> dict[str, str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            started.set()
            await release.wait()  # the first process dies here
        return {"city": input.city, "idempotency_key": ctx.idempotency_key}

    def script(request: ModelRequest, index: int) -> ScriptStep:
        if request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="slow_lookup", args={"city": "Porto"})])
        return ScriptStep(text="Done.")

    runtime_a = Runtime(tools=[slow_lookup], model=ScriptedModel(script), store=store_a, lease_ttl=0.2)
    runtime_b = Runtime(tools=[slow_lookup], model=ScriptedModel(script), store=store_b, lease_ttl=0.2)
    thread_id = f"t-{uuid.uuid4().hex[:8]}"
    try:
        run_id = await runtime_a.start_turn(Turn(thread_id=thread_id, actor=Actor(id="u1"), text="Porto?"))
        async with asyncio.timeout(10):
            await started.wait()
        await runtime_a.aclose()  # the process stops: its lease lapses

        async def resumed() -> bool:
            await runtime_b.sweep()
            if run_id in runtime_b._tasks:
                return True
            # B may have claimed the run and finished it within the same sweep (A is closed).
            run = await store_b.get_run(run_id)
            return run is not None and run.status != "running"

        await eventually(resumed)
        assert await runtime_b.wait(run_id, timeout=10) == "completed"
    finally:
        release.set()
        await runtime_a.aclose()
        await runtime_b.aclose()
    run = await store_b.get_run(run_id)
    assert run is not None and run.status == "completed"
    assert calls == 2
