"""Fixtures and tools shared by the engine tests."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from gateway import Runtime, Turn
from gateway.events import RunEvent
from tools import Actor, ConfirmTemplate, ToolPresentation, define_tool

ALICE = Actor(id="alice", roles=["member"])
BOB = Actor(id="bob", roles=["member"])


class CityInput(BaseModel):
    city: str


class KeyInput(BaseModel):
    key: str


def new_thread() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def turn(thread_id: str, text: str = "hello", actor: Actor = ALICE, **kw: Any) -> Turn:
    return Turn(thread_id=thread_id, actor=actor, text=text, **kw)


async def all_events(runtime: Runtime, thread_id: str, after: int = 0) -> list[RunEvent]:
    return [e async for e in runtime.events(thread_id, after)]


def types(events: list[RunEvent]) -> list[str]:
    return [e.type for e in events]


def weather_tool(calls: list[str] | None = None) -> Any:
    @define_tool(
        name="get_weather",
        description="Current weather for a city.",
        input=CityInput,
        presentation=ToolPresentation(label="Weather", running="Checking {city}", done="Checked {city}", icon="sun"),
    )
    async def get_weather(input: CityInput, ctx: Any) -> dict[str, Any]:
        if calls is not None:
            calls.append(input.city)
        return {"city": input.city, "temp": 21}

    return get_weather


def purge_tool(executed: list[str], **options: Any) -> Any:
    @define_tool(
        name="purge_cache",
        description="Purge one cache key.",
        input=KeyInput,
        kind="action",
        presentation=ToolPresentation(
            label="Cache purge",
            running="Purging {key}",
            done="Purged {key}",
            tone="destructive",
            confirm=ConfirmTemplate(title="Purge {key}?", verb="Purge"),
        ),
        **options,
    )
    async def purge_cache(input: KeyInput, ctx: Any) -> dict[str, Any]:
        executed.append(ctx.idempotency_key)
        return {"purged": input.key}

    return purge_cache


@pytest.fixture
async def make_runtime() -> AsyncIterator[Callable[..., Runtime]]:
    made: list[Runtime] = []

    def make(**kw: Any) -> Runtime:
        runtime = Runtime(**kw)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.aclose()


async def until(predicate: Callable[[], Any], timeout: float = 5.0) -> None:
    """Poll an async or sync predicate until true, under a watchdog."""
    async with asyncio.timeout(timeout):
        while True:
            value = predicate()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return
            await asyncio.sleep(0.01)
