"""``ScriptedModel``: a model whose answers are written in advance, for tests and benchmarks."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .._errors import ModelError
from ..events import Usage
from ._base import ModelChunk, ModelRequest, TextChunk, ToolCallRequest

__all__ = ["ScriptStep", "ScriptedModel"]


class ScriptStep(BaseModel):
    """One scripted model answer: text, tool calls, or an error.

    ``deltas`` streams the text in these pieces (``text`` is then their join); ``error`` makes the
    step fail with a ``ModelError`` of that message.
    """

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    tool_calls: list[ToolCallRequest] = Field(default_factory=list)
    deltas: list[str] | None = None
    usage: Usage | None = None
    error: str | None = None


ScriptFn = Callable[[ModelRequest, int], "ScriptStep | Awaitable[ScriptStep]"]


class ScriptedModel:
    """A model that answers each call with the next ``ScriptStep``.

    ``ScriptedModel([step, step])`` takes the steps in order across all runs;
    ``ScriptedModel(fn)`` calls ``fn(request, call_index)`` (sync or async) for each step.
    Running out of steps is a ``ModelError``. ``requests`` records every request, unless
    ``keep_requests=False`` (a benchmark's long-lived model: each request holds its messages).
    """

    def __init__(
        self, script: Sequence[ScriptStep] | ScriptFn, *, name: str = "scripted", keep_requests: bool = True
    ) -> None:
        """Make a model answering from ``script``.

        Args:
            script: The steps, or a function making each step.
            name: The model's name.
            keep_requests: Record each request in ``requests`` (``calls`` counts them either way).
        """
        self.name = name
        self._steps: list[ScriptStep] | None = None if callable(script) else list(script)
        self._fn: ScriptFn | None = script if callable(script) else None
        self.calls = 0
        self.keep_requests = keep_requests
        self.requests: list[ModelRequest] = []

    async def _next(self, request: ModelRequest) -> ScriptStep:
        index = self.calls
        self.calls += 1
        if self.keep_requests:
            self.requests.append(request)
        if self._fn is not None:
            step: Any = self._fn(request, index)
            if inspect.isawaitable(step):
                step = await step
            if not isinstance(step, ScriptStep):
                raise ModelError(f"script function returned {type(step).__name__}, not ScriptStep")
            return step
        assert self._steps is not None
        if index >= len(self._steps):
            raise ModelError(f"ScriptedModel ran out of steps (call {index + 1} of {len(self._steps)})")
        return self._steps[index]

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Yield the next step's text pieces, tool calls and usage."""
        step = await self._next(request)
        if step.error is not None:
            raise ModelError(step.error)
        pieces = step.deltas if step.deltas is not None else ([step.text] if step.text else [])
        for piece in pieces:
            yield TextChunk(piece)
        for call in step.tool_calls:
            yield call
        yield step.usage or Usage(model_calls=1)
