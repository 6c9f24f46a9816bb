"""Agents that hand work to each other, with scripted models, for the handoff tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway import Runtime
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest, ToolMessage

from ..engine.conftest import ALICE, all_events, new_thread, purge_tool, turn, types, until, weather_tool

__all__ = [
    "ALICE",
    "all_events",
    "asks",
    "asks_step",
    "last_tool_result",
    "new_thread",
    "purge_tool",
    "replying",
    "turn",
    "types",
    "until",
    "weather_tool",
]


def last_tool_result(request: ModelRequest) -> Any:
    """The newest tool result the model reads, parsed."""
    for message in reversed(request.messages):
        if isinstance(message, ToolMessage):
            return json.loads(message.content)
    return None


def asks_step(name: str, task: str, then: str | None = None) -> Callable[[ModelRequest, int], ScriptStep]:
    """A script step function: call ``name`` with ``task`` once per run, then say ``then`` (or echo the result)."""

    def step(request: ModelRequest, index: int) -> ScriptStep:
        if not any(isinstance(m, ToolMessage) for m in request.messages[-1:]):
            return ScriptStep(tool_calls=[ToolCallRequest(name=name, args={"task": task})])
        return ScriptStep(text=then if then is not None else f"Got: {json.dumps(last_tool_result(request))}")

    return step


def asks(name: str, task: str, then: str | None = None) -> ScriptedModel:
    """A model that calls ``name`` with ``task`` once per run, then says ``then`` (or echoes the result)."""
    return ScriptedModel(asks_step(name, task, then))


def replying(*calls: ToolCallRequest, text: str) -> ScriptedModel:
    """A model that makes ``calls`` (one step) and then answers ``text``, in every run."""

    def step(request: ModelRequest, index: int) -> ScriptStep:
        if calls and not isinstance(request.messages[-1], ToolMessage):
            return ScriptStep(tool_calls=list(calls))
        return ScriptStep(text=text)

    return ScriptedModel(step)


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
