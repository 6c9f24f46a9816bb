"""``RunDriver``: drives one run through model steps and tool calls, journaling as it goes.

Every model step result and every tool result is written to the store before the next step, so
a run can stop anywhere (a parked approval, a crash) and be resumed by any process: the journal is
replayed, settled calls never run again, and a call that started but did not settle runs again
with the same idempotency key.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from tools import (
    AttachedFile,
    PreflightCompleted,
    PreflightDenied,
    PreflightReady,
    Tool,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolFailed,
    ToolInputInvalidError,
    UiComponent,
    fill_result_view,
    narrate_done,
    narrate_running,
)

from ._collector import UiCollector
from ._driver_actions import ActionSteps
from ._driver_handoffs import HandoffSteps
from ._driver_parts import _PersonaFailed, _StepNotStored, _UserCancelled
from ._errors import GatewayError, ModelError, QuotaExceededError, StoreUnavailableError, ThreadNotFoundError
from ._guards import guard_output
from ._json import within_depth
from ._logs import log_scope
from ._personas import persona_instructions, persona_of, persona_scope
from ._pricing import run_cost
from ._tracing import chat_span, run_span, set_usage, tool_span
from ._transcript import error_value, jsonable, transcript_of
from ._unicode import valid_text, valid_tree
from .events import (
    Attachment,
    QuotaWarningEvent,
    RunErrorEvent,
    RunEvent,
    RunFinishedEvent,
    RunStatus,
    TextDeltaEvent,
    TextEndEvent,
    ToolCompletedEvent,
    ToolDeniedEvent,
    ToolFailedEvent,
    ToolStartedEvent,
    UiEvent,
    Usage,
    new_id,
    now_iso,
)
from .models import (
    AssistantMessage,
    Model,
    ModelChunk,
    ModelRequest,
    TextChunk,
    ToolCallRequest,
    ToolMessage,
    UserMessage,
)
from .stores import (
    ApprovalRecord,
    Batch,
    ModelStepEntry,
    PlannedCall,
    PreflightEntry,
    RunRecord,
    ToolSettledEntry,
)

if TYPE_CHECKING:
    from ._agents import Agent
    from ._attachments import AttachmentReader
    from ._host import RunHost

__all__ = ["RunDriver"]

logger = logging.getLogger("gateway.run")

UNKNOWN_TOOL = "(unknown)"
"""What observers hear as the tool of a call that names no registered tool."""

T = TypeVar("T")
Message = UserMessage | AssistantMessage | ToolMessage
Preflight = PreflightReady | PreflightDenied | PreflightCompleted

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


UNSTORABLE: tuple[type[Exception], ...] = (PydanticSerializationError, UnicodeError, ValueError, TypeError)
"""What a store raises for a batch it can never take (it cannot be encoded), as opposed to an
outage (``StoreUnavailableError``) or a fault of the store itself, which the run leaves to the
lease and a later resume."""


class RunDriver(ActionSteps, HandoffSteps):
    """Drives one run on this process. The runtime creates one per run it drives."""

    def __init__(self, host: RunHost, run: RunRecord, agent: Agent, *, history: list[Message] | None = None) -> None:
        self.host = host
        self.store = host.store
        self.run = run
        self.agent = agent
        model = agent.model or host.model
        if model is None:
            raise RuntimeError(f"agent {agent.name!r} has no model")
        self.model: Model = model
        self.persona = persona_of(agent, run)
        self.scope = persona_scope(agent, self.persona)
        """The agent as the registry gates it: its tools narrowed by the run's persona."""
        self._instructions: str | None = None
        self.cancel_requested = False
        self._task: asyncio.Task[Any] | None = None
        self._guards = 0
        self._cancel_sent = False
        self._running: dict[str, PlannedCall] = {}
        self._steps: dict[int, ModelStepEntry] = {}
        self._refused_step: ModelStepEntry | None = None  # an output guard refused its text
        self._settled: dict[str, ToolSettledEntry] = {}
        self._preflights: dict[tuple[str, str], PreflightEntry] = {}
        self._step_messages: dict[int, list[AssistantMessage | ToolMessage]] = {}
        self._offered: list[ToolDefinition] | None = None
        self._history = history
        """The thread's history as the run began (read from the store when not given)."""
        self._started = time.perf_counter()
        self._output_refusal: str | None = None
        """Set when an output guard refused a step's text: what the person is told."""

    # -- plumbing -----------------------------------------------------------------------------------

    def event(self, cls: type[Any], **fields: Any) -> Any:
        """An event of this run (the store assigns its ``seq``).

        Validated like any other: pydantic-core validates these small models faster than
        ``model_construct`` builds them.
        """
        return cls(thread_id=self.run.thread_id, run_id=self.run.run_id, at=now_iso(), **fields)

    def ui_event(self, item: UiComponent, call_id: str | None) -> UiEvent:
        """A ``ui`` event for a component a tool showed."""
        event: UiEvent = self.event(
            UiEvent,
            id=item.id or f"{call_id}:ui:{os.urandom(4).hex()}",
            component=item.component,
            version=item.version,
            props=within_depth(valid_tree(item.props)),
            fallback_text=valid_text(item.fallback_text) if item.fallback_text else item.fallback_text,
            tool_call_id=call_id,
        )
        return event

    async def write(self, batch: Batch) -> list[RunEvent]:
        """Write a batch for this run (its record included, so journal entries attach to it).

        While the store is away the batch is held and written once it is back (for up to the
        runtime's ``store_retry``): a tool that finished during an outage is journaled, not run
        again. The run's lease is renewed, or taken back if it lapsed meanwhile and no other
        process took the run; if one did, this driver stops and that one goes on.
        """
        self.run.updated_at = now_iso()
        batch.run = self.run
        try:
            events = await self._write_once(batch)
        except StoreUnavailableError:
            if self.host.store_retry <= 0:
                raise
            events = await self._write_when_back(batch)
        steps = [entry for entry in batch.journal if isinstance(entry, ModelStepEntry) and entry.model is not None]
        if steps:  # journaled now (a replayed step never is again): charged once (gateway._usage)
            try:
                await self.host.usage.charge(self.run, steps)
            except StoreUnavailableError:
                if not batch.release:
                    raise  # no further step runs until the ledger can be written
                # The run ended (or parked) in this batch: its end stands, its handoff answers.
                logger.error(
                    "run %s: %d step(s) journaled but not charged: the store was away", self.run.run_id, len(steps)
                )
        return events

    async def _write_once(self, batch: Batch) -> list[RunEvent]:
        """One attempt; a batch the store cannot take (not an outage) raises ``_StepNotStored``."""
        try:
            return await self.host.write(self.run.thread_id, batch)
        except UNSTORABLE as exc:
            # The same write would fail again on any process: the run stops here (see drive)
            # instead of being resumed, re-asking the model, for ever.
            raise _StepNotStored(f"{type(exc).__name__}: {exc}") from exc

    async def _write_when_back(self, batch: Batch) -> list[RunEvent]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.host.store_retry
        delay = 0.025
        logger.warning("run %s: the store is unavailable; holding a step until it is back", self.run.run_id)
        while True:
            await asyncio.sleep(delay)  # backoff between attempts, not synchronisation
            # Within the grace other processes give a lapsed lease: the first try after the
            # store is back takes the lease back before any of them takes the run over.
            delay = self.host.leases.retry_delay(delay)
            if self.host.closed:  # a shielded write outliving its runtime gives up
                raise StoreUnavailableError(f"run {self.run.run_id}: the runtime closed while the store was away")
            try:
                held = await self.host.leases.reclaim(self.run)
                events = await self._write_once(batch) if held else None
            except StoreUnavailableError:
                if loop.time() >= deadline:
                    raise
                continue
            if events is None:
                # Stopped as a process that lost its store stops: the run is another's now.
                raise StoreUnavailableError(f"run {self.run.run_id} is driven by another process now")
            logger.info("run %s: the store is back; the held step is written", self.run.run_id)
            return events

    def request_cancel(self) -> None:
        """Stop at the next safe point; a model call or tools in flight are cancelled now."""
        self.cancel_requested = True
        if self._guards and not self._cancel_sent and self._task is not None:
            self._cancel_sent = True
            self._task.cancel()

    async def _guarded(self, awaitable: Awaitable[T]) -> T:
        """Await model or tool work in a section a person's Stop may interrupt.

        A Stop cancels the driving task only while it is inside such a section, never during a
        store write. A cancellation from elsewhere (the process stopping) passes through.
        """
        self._guards += 1
        try:
            if self._cancel_sent or self.cancel_requested:
                raise _UserCancelled
            return await awaitable
        except asyncio.CancelledError:
            task = self._task
            if self._cancel_sent and task is not None and task.cancelling() == 1:
                task.uncancel()
                raise _UserCancelled from None
            raise
        finally:
            self._guards -= 1

    def _ctx(self, call: PlannedCall) -> ToolContext:
        turn = self.run.turn
        return ToolContext(
            actor=turn.actor,
            thread_id=self.run.thread_id,
            run_id=self.run.run_id,
            request_id=self.run.run_id,
            tool_call_id=call.id,
            agent_name=self.agent.name,
            page_context=dict(turn.page_context),
            ui_capabilities=turn.ui_capabilities,
            channel=turn.channel,
            attachments=self._attached_files(),
            confirm_tokens=self.store,
        )

    def _attached_files(self) -> tuple[AttachedFile, ...]:
        """The turn's attachments as tools see them, each read through the host's reader."""
        reader = self.host.attachment_reader
        if reader is None:
            return ()

        def read_one(attachment: Attachment, read: AttachmentReader = reader) -> Callable[[], Awaitable[bytes]]:
            return lambda: read(attachment)

        return tuple(
            AttachedFile(id=a.id, name=a.name, mime=a.mime, size=a.size, reader=read_one(a))
            for a in self.run.turn.attachments
        )

    # -- the loop -----------------------------------------------------------------------------------

    async def drive(self, *, resume: bool) -> RunStatus:
        """Run (or resume) the run until it ends or parks; return how it stopped."""
        self._task = asyncio.current_task()
        with self._log_scope(), run_span(self.run, resume=resume):
            try:
                if resume:
                    await self._load_journal()
                return await self._drive()
            except _StepNotStored as exc:
                # Wherever it came from (a step, or the end a failure or a Stop tried to write).
                logger.error("run %s failed: the store refused a step: %s", self.run.run_id, exc)
                return await self._fail_unstored()
            except ThreadNotFoundError:
                # Erased under the run (a turn that began while its thread was being erased, see
                # Threads): it goes with its thread, and there is nothing left to write its end to.
                logger.info("run %s stopped: its thread was erased", self.run.run_id)
                return "cancelled"

    def _log_scope(self) -> contextlib.AbstractContextManager[None]:
        """Lines logged while this driver works name its run, thread, channel and actor."""
        run, turn = self.run, self.run.turn
        return log_scope(run_id=run.run_id, thread_id=run.thread_id, channel=turn.channel, actor=turn.actor.id)

    async def _drive(self) -> RunStatus:
        try:
            return await self._loop()
        except _UserCancelled:
            batch = Batch()
            for call in list(self._running.values()):
                self._settle(batch, call, "failed", error=error_value("cancelled", "The run was stopped."))
                self.host.observe_tool(self.run, call.name, "cancelled", 0.0)
            return await self.finish("cancelled", prefix=batch)
        except ModelError as exc:
            logger.warning("run %s: the model failed: %s", self.run.run_id, exc)
            return await self.finish("failed", error=(exc.code, exc.public))
        except QuotaExceededError as exc:
            logger.info("run %s stopped: its actor used the %s's token budget", self.run.run_id, exc.period)
            return await self.finish("failed", error=(exc.code, str(exc)), period=exc.period)
        except _PersonaFailed as exc:
            logger.error("run %s failed: %s", self.run.run_id, exc)
            return await self.finish("failed", error=("persona_failed", "The persona's instructions failed."))
        except (_StepNotStored, StoreUnavailableError, asyncio.CancelledError):
            # The store is gone or this process is stopping: leave the run as it is. Its lease
            # lapses and a process that can reach the store resumes it from the journal.
            raise
        except ThreadNotFoundError:
            raise  # the thread was erased: see drive
        except Exception as exc:
            if isinstance(exc, GatewayError) and exc.status == 503:
                raise
            logger.exception("run %s failed", self.run.run_id)
            return await self.finish("failed", error=("internal_error", "The run failed unexpectedly."))

    async def _fail_unstored(self) -> RunStatus:
        """End a run whose step the store refused, writing only what is known to be storable.

        The transcript and the unwritten step stay out (they may be what the store refused), so
        the run's end always lands: it is never left running for a sweep to resume it and ask
        the model again for a step it already took.
        """
        code, message = "store_rejected", "A step of this run could not be stored, so the run stopped."
        self.run.error = {"code": code, "message": message}
        self.run.status = "failed"
        self.run.cost_usd = run_cost(self._steps.values())
        batch = Batch(
            events=[
                self.event(RunErrorEvent, code=code, message=message),
                self.event(RunFinishedEvent, status="failed", usage=self.run.usage, cost_usd=self.run.cost_usd),
            ],
            release=True,
        )
        await self.write(batch)
        self.host.observe_run_finished(self.run, "failed", time.perf_counter() - self._started)
        await self.host.handoffs.ended(self, "failed")
        return "failed"

    async def _loop(self) -> RunStatus:
        history = self._history if self._history is not None else await self.store.get_messages(self.run.thread_id)
        history = history_window(history, self.agent.history_limit)
        if self.run.input_refusal is not None and not self._steps:  # the model is not called
            return await self.finish("failed", error=("input_refused", self.run.input_refusal))
        step = 0
        while True:
            if self.cancel_requested:
                return await self.finish("cancelled")
            entry = self._steps.get(step)
            prefix = Batch()
            direct = self.run.direct_call
            if direct is not None and step > 0:
                return await self.finish("completed", prefix=prefix)  # its one call settled
            if entry is None and direct is not None:
                # A direct call (MCP's tools/call): the call is step 0, journaled as a model step.
                entry = ModelStepEntry(step=0, message_id=new_id("msg"), text=None, calls=[direct], usage=Usage())
                prefix.journal.append(entry)
                self._steps[step] = entry
            elif entry is None:
                if step >= self.agent.max_steps:
                    return await self.finish(
                        "failed", error=("max_steps", f"The run stopped after {self.agent.max_steps} model steps.")
                    )
                await self._check_quota()
                entry, prefix.events = await self._model_step(step, history)
                if self._output_refusal is not None:
                    # Nobody saw the step, but it was paid for: journaled bare (no text, no calls,
                    # out of the history) with the run's end, so the ledger charges it once.
                    self._refused_step = entry.model_copy(update={"text": None, "calls": []})
                    prefix.journal.append(self._refused_step)
                    return await self.finish("failed", prefix=prefix, error=("output_refused", self._output_refusal))
                prefix.journal.append(entry)
                self._steps[step] = entry
            if not entry.calls:
                return await self.finish("completed", prefix=prefix)
            if await self._run_calls(entry, prefix):
                return "awaiting-approval"
            step += 1

    async def _check_quota(self) -> None:
        """Before a model step: refuse it past the budget (``QuotaExceededError``), warn once near it."""
        warning = await self.host.usage.before_step(self.run, self.agent)
        if warning is not None:
            period, used, limit = warning
            self.run.quota_warned = True
            await self.write(Batch(events=[self.event(QuotaWarningEvent, period=period, used=used, limit=limit)]))

    async def _definitions(self) -> list[ToolDefinition]:
        """The tools offered in this turn: the gates run once per turn (and again on each call)."""
        if self._offered is None:
            turn = self.run.turn
            self._offered = await self.host.registry.definitions_for(
                turn.actor, self.scope, turn.ui_capabilities, thread_id=self.run.thread_id
            )
            handoffs = self.host.handoffs.definitions(self.agent)
            self._offered.extend(d for d in handoffs if self._handoff_of(d.name) is not None)
        return list(self._offered)

    def _transcript(self) -> list[AssistantMessage | ToolMessage]:
        messages: list[AssistantMessage | ToolMessage] = []
        for step in sorted(self._steps):
            cached = self._step_messages.get(step)
            if cached is None:
                entry = self._steps[step]
                cached = transcript_of([entry], self._settled)
                if all(call.id in self._settled for call in entry.calls):
                    self._step_messages[step] = cached  # a settled step never changes again
            messages.extend(cached)
        return messages

    async def _model_step(self, step: int, history: list[Message]) -> tuple[ModelStepEntry, list[RunEvent]]:
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
                            calls.append(self._plan(chunk))
                        case Usage():
                            usage = usage + chunk

        with chat_span(self.model, step) as span:
            await self._guarded(consume())
            set_usage(span, usage.input_tokens, usage.output_tokens)
        if usage.model_calls == 0:
            usage = usage + Usage(model_calls=1)
        self.run.usage = self.run.usage + usage
        full_text = "".join(text) or None
        if held and full_text is not None:
            guarded = await self._guarded(guard_output(self, step, message_id, full_text))
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

    def _run_instructions(self) -> str:
        """The agent's instructions, or its persona's: a persona's function is called once per drive."""
        if self._instructions is None:
            try:
                self._instructions = persona_instructions(self.agent, self.persona, self.run)
            except Exception as exc:
                name = self.persona.id if self.persona else ""
                raise _PersonaFailed(f"persona {name!r}: instructions raised {type(exc).__name__}: {exc}") from exc
        return self._instructions

    @staticmethod
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

    # -- ending -------------------------------------------------------------------------------------

    async def finish(
        self,
        status: RunStatus,
        *,
        prefix: Batch | None = None,
        error: tuple[str, str] | None = None,
        period: str | None = None,
    ) -> RunStatus:
        """End the run: its transcript joins the thread's history, ``run-finished`` is written.

        ``period`` is a ``quota_exceeded`` error's (``day`` or ``month``).
        """
        batch = prefix or Batch()
        if error is not None:
            code, message = error[0], valid_text(error[1])  # a provider's error text, say
            self.run.error = {"code": code, "message": message}
            batch.events.append(self.event(RunErrorEvent, code=code, message=message, period=period))
        self.run.status = status
        refused = [self._refused_step] if self._refused_step is not None else []
        self.run.cost_usd = run_cost([*self._steps.values(), *refused])
        batch.events.append(
            self.event(RunFinishedEvent, status=status, usage=self.run.usage, cost_usd=self.run.cost_usd)
        )
        batch.messages.extend(self._transcript())
        batch.release = True
        await self.write(batch)
        self.host.observe_run_finished(self.run, status, time.perf_counter() - self._started)
        await self.host.handoffs.ended(self, status)
        return status

    async def _park(self, approval: ApprovalRecord | None, batch: Batch) -> None:
        self.run.status = "awaiting-approval"
        if approval is not None:
            batch.approvals.append(approval)
            batch.events.append(self.host.approvals.requested_event(approval))
        self.run.cost_usd = run_cost(self._steps.values())
        batch.events.append(
            self.event(RunFinishedEvent, status="awaiting-approval", usage=self.run.usage, cost_usd=self.run.cost_usd)
        )
        batch.release = True
        await self.write(batch)
        self.host.observe_run_finished(self.run, "awaiting-approval", time.perf_counter() - self._started)

    # -- tool calls ---------------------------------------------------------------------------------

    async def _run_calls(self, entry: ModelStepEntry, prefix: Batch) -> bool:
        """Run a step's calls; True when the run parked for an approval (or for a sub-agent's)."""
        if any(self._handoff_of(call.name) is not None for call in entry.calls):
            return await self._run_with_handoffs(entry, prefix)
        registry = self.host.registry
        kinds = [(registry.get(call.name) or None) for call in entry.calls]
        if all(tool is None or tool.kind == "read" for tool in kinds):
            await self._run_reads(entry.calls, prefix)
            return False
        if prefix.events or prefix.journal:
            await self.write(prefix)
        for call, tool in zip(entry.calls, kinds, strict=True):
            if self.cancel_requested:
                raise _UserCancelled
            if call.id in self._settled:
                continue
            if tool is None or tool.kind == "read":
                await self._run_reads([call], Batch())
            elif await self._run_action(call):
                return True
        return False

    async def _admit(self, call: PlannedCall, ctx: ToolContext) -> tuple[Tool, BaseModel]:
        """Gates and validation for one call; raises ``ToolError`` when it may not run."""
        tool = await self.host.registry.check(call.name, ctx, self.scope)
        if call.args is None:
            raise ToolInputInvalidError(
                f"Arguments for tool {call.name!r} are not a JSON object: {call.arguments[:200]}", tool=call.name
            )
        return tool, tool.validate_input(call.args)

    def _settle(self, batch: Batch, call: PlannedCall, status: str, **fields: Any) -> None:
        entry = ToolSettledEntry(tool_call_id=call.id, name=call.name, status=status, **fields)
        self._settled[call.id] = entry
        batch.journal.append(entry)
        match status:
            case "failed":
                batch.events.append(
                    self.event(ToolFailedEvent, tool_call_id=call.id, tool=call.name, error=entry.error)
                )
            case "denied":
                batch.events.append(
                    self.event(ToolDeniedEvent, tool_call_id=call.id, tool=call.name, reason=entry.reason or "")
                )

    def _started_event(self, call: PlannedCall, tool: Tool, validated: BaseModel) -> ToolStartedEvent:
        data = validated.model_dump(mode="json")
        presentation = tool.presentation_for(data)
        started: ToolStartedEvent = self.event(
            ToolStartedEvent,
            tool_call_id=call.id,
            tool=tool.name,
            kind=tool.kind,
            input=data,
            label=presentation.label if presentation else None,
            running=narrate_running(presentation, data),
            icon=presentation.icon if presentation else None,
        )
        return started

    async def _run_reads(self, calls: list[PlannedCall], prefix: Batch) -> None:
        admitted: list[tuple[PlannedCall, Tool, BaseModel, ToolContext]] = []
        for call in calls:
            if call.id in self._settled:
                continue
            ctx = self._ctx(call)
            try:
                tool, validated = await self._admit(call, ctx)
            except ToolError as exc:
                self._settle(prefix, call, "failed", error=error_value(exc.code, str(exc)))
                # A name the model made up is not a label value: each would be a new series.
                known = self.host.registry.get(call.name) is not None
                self.host.observe_tool(self.run, call.name if known else UNKNOWN_TOOL, "failed", 0.0)
                continue
            prefix.events.append(self._started_event(call, tool, validated))
            admitted.append((call, tool, validated, ctx))
        if prefix.events or prefix.journal:
            await self.write(prefix)
        for call, *_ in admitted:
            self._running[call.id] = call
        if len(admitted) == 1:
            await self._execute(*admitted[0])
        elif admitted:
            await self._guarded(self._execute_all(admitted))

    async def _execute_all(self, admitted: list[tuple[PlannedCall, Tool, BaseModel, ToolContext]]) -> None:
        """Run a step's read calls concurrently: the step costs its slowest call."""
        try:
            async with asyncio.TaskGroup() as group:
                for item in admitted:
                    group.create_task(self._execute(*item, guarded=False))
        except BaseExceptionGroup as failed:
            # Calls settle their own tool errors, so what reaches here is the store failing or
            # the run stopping: surface it as itself, as a single call would.
            for kind in (asyncio.CancelledError, StoreUnavailableError, _StepNotStored):
                match = failed.subgroup(kind)
                if match is not None:
                    raise match.exceptions[0] from failed
            raise

    async def _execute(
        self, call: PlannedCall, tool: Tool, validated: BaseModel, ctx: ToolContext, *, guarded: bool = True
    ) -> None:
        """Run ``execute``, then ``present``, and write the outcome with its ``ui`` events.

        A Stop interrupts the call (the driver settles it as cancelled); ``guarded=False`` is for
        calls in a task group, whose whole group is guarded instead.
        """
        with tool_span(call, tool.kind, lambda: self._outcome(call.id)):
            await self._execute_traced(call, tool, validated, ctx, guarded=guarded)

    def _outcome(self, call_id: str) -> str | None:
        settled = self._settled.get(call_id)
        return settled.status if settled is not None else None

    async def _execute_traced(
        self, call: PlannedCall, tool: Tool, validated: BaseModel, ctx: ToolContext, *, guarded: bool
    ) -> None:
        collector = UiCollector(make_event=self.ui_event, write=self.write, call_id=call.id)
        ctx.ui_sink = collector.push
        started = time.perf_counter()
        batch = Batch()
        self._running[call.id] = call
        work = self.host.registry.execute(tool, validated, ctx)
        try:
            output = await (self._guarded(work) if guarded else work)
        except (_UserCancelled, asyncio.CancelledError):
            batch.events.extend(await collector.drain())
            if batch.events:
                try:
                    await asyncio.shield(self.write(batch))
                except _StepNotStored as exc:  # the Stop (or shutdown) goes on regardless
                    logger.warning("run %s: components shown before the stop were not stored: %s", self.run.run_id, exc)
            raise
        except (ToolError, ToolFailed) as exc:
            self._settle(batch, call, "failed", error=error_value(getattr(exc, "code", "failed"), str(exc)))
        except Exception as exc:
            logger.warning("tool %s failed in run %s", tool.name, self.run.run_id, exc_info=True)
            self._settle(batch, call, "failed", error=error_value("tool_error", f"{type(exc).__name__}: {exc}"))
        else:
            await self._complete(batch, call, tool, validated, ctx, output)
        batch.events[:0] = await collector.drain()
        await self.write(batch)
        self._running.pop(call.id, None)
        self.host.observe_tool(self.run, tool.name, self._settled[call.id].status, time.perf_counter() - started)

    async def _complete(
        self,
        batch: Batch,
        call: PlannedCall,
        tool: Tool,
        validated: BaseModel,
        ctx: ToolContext,
        output: Any,
        *,
        done: str | None = None,
    ) -> None:
        """Settle a call as completed: its presentation, narration and result view.

        ``present`` gets what ``execute`` returned (a pydantic model stays one); the events and
        the journal get its JSON form.
        """
        returned, output = output, jsonable(output)
        try:
            for index, item in enumerate(await self.host.registry.present(tool, returned, ctx)):
                if item.id is None:
                    item = item.model_copy(update={"id": f"{call.id}:present:{index}"})
                batch.events.append(self.ui_event(item, call.id))
        except Exception:
            # A presentation error never fails the tool: the action already happened.
            logger.warning("present() of tool %s failed; the call still succeeded", tool.name, exc_info=True)
        data = validated.model_dump(mode="json")
        presentation = tool.presentation_for(data)
        entry = ToolSettledEntry(tool_call_id=call.id, name=tool.name, status="completed", output=output)
        self._settled[call.id] = entry
        batch.journal.append(entry)
        batch.events.append(
            self.event(
                ToolCompletedEvent,
                tool_call_id=call.id,
                tool=tool.name,
                output=output,
                done=done or narrate_done(presentation, data),
                result=fill_result_view(presentation.result, output) if presentation else None,
            )
        )

    async def _load_journal(self) -> None:
        """Replay the run's journal: its steps, settled calls and preflight answers."""
        for entry in await self.store.read_journal(self.run.thread_id, self.run.run_id):
            match entry:
                case ModelStepEntry():
                    self._steps[entry.step] = entry
                case ToolSettledEntry():
                    self._settled[entry.tool_call_id] = entry
                case PreflightEntry():
                    self._preflights[(entry.tool_call_id, entry.phase)] = entry

    async def supersede(self, reason: str) -> RunStatus:
        """End a parked run because the person moved on (a new turn or a Stop)."""
        with self._log_scope():
            await self._load_journal()
            batch = Batch()
            for entry in self._steps.values():
                for call in entry.calls:
                    if call.id not in self._settled:
                        self._settle(batch, call, "denied", reason=reason)
            return await self.finish("cancelled", prefix=batch)


def history_window(messages: list[Message], limit: int | None) -> list[Message]:
    """The newest ``limit`` messages, from the first person's message among them on.

    Starting at a person's message keeps each tool result with the call that asked for it (an
    OpenAI-style model refuses a tool message whose call it never saw). The newest message is
    the turn's own, so the window is never empty.
    """
    if limit is None:
        return messages
    window = messages[-limit:]
    for index, message in enumerate(window):
        if isinstance(message, UserMessage):
            return window[index:]
    return window
