"""``ModelSteps``: how a run's driver takes a model step: the request, the stream, guards, usage.

A part of ``RunDriver`` (``gateway._driver``), kept apart for its size: the methods are the
driver's own and read its state. A step is refused before it starts past the actor's budget
(``_check_quota``); its text streams out in small batches, or is held whole for the agent's output
guards; its usage is bounded and priced here and charged when the step is journaled (``write``).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from tools import ToolDefinition

from ._driver_parts import Driver, _PersonaFailed
from ._guards import guard_output
from ._json import within_depth
from ._personas import persona_instructions
from ._tracing import chat_span, set_usage
from ._unicode import valid_text, valid_tree
from .events import QuotaWarningEvent, RunEvent, TextDeltaEvent, TextEndEvent, Usage, new_id
from .models import ModelChunk, ModelRequest, TextChunk, ToolCallRequest
from .stores import Batch, ModelStepEntry, PlannedCall

if TYPE_CHECKING:
    from ._driver import Message, RunDriver

__all__ = ["DELTA_FLUSH_SECONDS", "ModelSteps"]

DELTA_FLUSH_SECONDS = 0.025
"""Text pieces arriving within this window are written together (fewer writes, same stream)."""


@contextlib.asynccontextmanager
async def _closing(stream: AsyncIterator[ModelChunk]) -> AsyncGenerator[AsyncIterator[ModelChunk], None]:
    """``stream``, closed on the way out when it can be (an async generator's ``finally`` runs now)."""
    try:
        yield stream
    finally:
        if isinstance(stream, AsyncGenerator):
            await stream.aclose()


class ModelSteps:
    """The model steps of ``RunDriver``."""

    _instructions: str | None
    _offered: list[ToolDefinition] | None

    async def _check_quota(self: Driver) -> None:
        """Before a model step: refuse it past the budget (``QuotaExceededError``), warn once near it."""
        warning = await self.host.usage.before_step(self.run, self.agent)
        if warning is not None:
            period, used, limit = warning
            self.run.quota_warned = True
            await self.write(Batch(events=[self.event(QuotaWarningEvent, period=period, used=used, limit=limit)]))

    async def _definitions(self: Driver) -> list[ToolDefinition]:
        """The tools offered in this turn: the gates run once per turn (and again on each call)."""
        if self._offered is None:
            turn = self.run.turn
            self._offered = await self.host.registry.definitions_for(
                turn.actor, self.scope, turn.ui_capabilities, thread_id=self.run.thread_id
            )
            handoffs = self.host.handoffs.definitions(self.agent)
            self._offered.extend(d for d in handoffs if self._handoff_of(d.name) is not None)
        return list(self._offered)

    async def _model_step(self: Driver, step: int, history: list[Message]) -> tuple[ModelStepEntry, list[RunEvent]]:
        """Ask the model for one step; stream its text; return the entry and unwritten events."""
        turn = self.run.turn
        request = ModelRequest(
            agent=self.agent.name,
            instructions=self._run_instructions(),
            messages=[*history, *self._transcript()],
            tools=await self._definitions(),
            step=step,
            metadata={
                "channel": turn.channel,
                "page_context": turn.page_context,
                "actor_id": turn.actor.id,
                "thread_id": self.run.thread_id,
                "run_id": self.run.run_id,
            },
            read_attachment=self.host.attachment_reader,
        )
        message_id = new_id("msg")
        started = time.perf_counter()
        text: list[str] = []
        calls: list[PlannedCall] = []
        usage = Usage()
        pending: list[RunEvent] = []
        first_pending = 0.0
        held = bool(self.agent.output_guards)  # the text is guarded whole before anyone sees it

        async def consume() -> None:
            nonlocal usage, first_pending
            async with _closing(self.model.stream(request)) as stream:
                async for chunk in stream:
                    match chunk:
                        case TextChunk(delta=delta) if delta:
                            delta = valid_text(delta)
                            text.append(delta)
                            if not pending:
                                first_pending = time.perf_counter()
                            pending.append(self.event(TextDeltaEvent, message_id=message_id, delta=delta))
                            if not held and time.perf_counter() - first_pending >= DELTA_FLUSH_SECONDS:
                                batch_events = list(pending)
                                pending.clear()
                                await self.write(Batch(events=batch_events))
                        case ToolCallRequest():
                            calls.append(_plan(chunk))
                        case Usage():
                            usage = usage + chunk

        with chat_span(self.model, step) as span:
            await self._guarded(consume())
            set_usage(span, usage.input_tokens, usage.output_tokens)
        if usage.model_calls == 0:
            usage = usage + Usage(model_calls=1)
        usage = self.host.usage.bounded(usage)  # a provider's negative or absurd count, bounded once
        self.run.usage = self.run.usage + usage
        full_text = "".join(text) or None
        if held and full_text is not None:
            guarded = await self._guarded(guard_output(cast("RunDriver", self), step, message_id, full_text))
            full_text, pending[:] = guarded.text, guarded.events
            self._output_refusal = guarded.refusal
        if full_text is not None:
            pending.append(self.event(TextEndEvent, message_id=message_id, text=full_text))
        self.host.observe_model_step(self.run, time.perf_counter() - started)
        model, cost = self.model.name, self.host.usage.cost(self.model.name, usage)
        entry = ModelStepEntry(
            step=step, message_id=message_id, text=full_text, calls=calls, usage=usage, model=model, cost_usd=cost
        )
        return entry, pending

    def _run_instructions(self: Driver) -> str:
        """The agent's instructions, or its persona's: a persona's function is called once per drive."""
        if self._instructions is None:
            try:
                self._instructions = persona_instructions(self.agent, self.persona, self.run)
            except Exception as exc:
                name = self.persona.id if self.persona else ""
                raise _PersonaFailed(f"persona {name!r}: instructions raised {type(exc).__name__}: {exc}") from exc
        return self._instructions


def _plan(request: ToolCallRequest) -> PlannedCall:
    """The call as journaled: its arguments' strings made valid (a model may send lone surrogates).

    Nested at most ``MAX_JSON_DEPTH`` levels: deeper parts are kept as their JSON text, which a
    store can read back.
    """
    args: dict[str, Any] | None
    if isinstance(request.args, dict):
        args = within_depth(valid_tree(request.args))
        arguments = request.arguments_json() if args is request.args else json.dumps(args, separators=(",", ":"))
    else:
        arguments = valid_text(request.args)
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            parsed = None
        args = within_depth(valid_tree(parsed)) if isinstance(parsed, dict) else None
    return PlannedCall(id=new_id("tc"), name=valid_text(request.name), arguments=arguments, args=args)
