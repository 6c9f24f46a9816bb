"""``RunDriver``: drives one run through model steps and tool calls, journaling as it goes.

Every model step result and every tool result is written to the store before the next step, so
a run can stop anywhere (a parked approval, a crash) and be resumed by any process: the journal is
replayed, settled calls never run again, and a call that started but did not settle runs again
with the same idempotency key.

The loop, the journal, writes and the run's end are here; a model step is ``ModelSteps``
(``gateway._driver_model``), a step's tool calls ``ToolSteps`` (``gateway._driver_tools``), an
action's preflight and approval ``ActionSteps``, a handoff ``HandoffSteps``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic_core import PydanticSerializationError

from tools import PreflightCompleted, PreflightDenied, PreflightReady, ToolDefinition, UiComponent

from ._driver_actions import ActionSteps
from ._driver_handoffs import HandoffSteps
from ._driver_model import ModelSteps
from ._driver_parts import _PersonaFailed, _StepNotStored, _UserCancelled
from ._driver_tools import ToolSteps
from ._errors import GatewayError, ModelError, QuotaExceededError, StoreUnavailableError, ThreadNotFoundError
from ._json import within_depth
from ._logs import log_scope
from ._personas import persona_of, persona_scope
from ._pricing import run_cost
from ._tracing import run_span
from ._transcript import error_value, transcript_of
from ._unicode import valid_text, valid_tree
from .events import RunErrorEvent, RunEvent, RunFinishedEvent, RunStatus, UiEvent, Usage, new_id, now_iso
from .models import AssistantMessage, Model, ToolMessage, UserMessage
from .stores import ApprovalRecord, Batch, ModelStepEntry, PlannedCall, PreflightEntry, RunRecord, ToolSettledEntry

if TYPE_CHECKING:
    from ._agents import Agent
    from ._host import RunHost

__all__ = ["RunDriver"]

logger = logging.getLogger("gateway.run")

T = TypeVar("T")
Message = UserMessage | AssistantMessage | ToolMessage
Preflight = PreflightReady | PreflightDenied | PreflightCompleted

UNSTORABLE: tuple[type[Exception], ...] = (PydanticSerializationError, UnicodeError, ValueError, TypeError)
"""What a store raises for a batch it can never take (it cannot be encoded), as opposed to an
outage (``StoreUnavailableError``) or a fault of the store itself, which the run leaves to the
lease and a later resume."""


class RunDriver(ModelSteps, ToolSteps, ActionSteps, HandoffSteps):
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
        self._settled: dict[str, ToolSettledEntry] = {}
        self._preflights: dict[tuple[str, str], PreflightEntry] = {}
        self._step_messages: dict[int, list[AssistantMessage | ToolMessage]] = {}
        self._offered: list[ToolDefinition] | None = None
        self._history = history
        """The thread's history as the run began (read from the store when not given)."""
        self._started = time.perf_counter()
        self._output_refusal: str | None = None
        """Set when an output guard refused a step's text: what the person is told."""
        self._refused_step: ModelStepEntry | None = None
        """The step an output guard refused: in the journal and the run's cost, not in its transcript."""

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
        steps = [entry for entry in batch.journal if isinstance(entry, ModelStepEntry) and entry.model is not None]
        if steps:  # a store that can charges them with the write (Batch.usage)
            batch.usage = self.host.usage.entries(self.run, steps)
        try:
            events = await self._write_once(batch)
        except StoreUnavailableError:
            if self.host.store_retry <= 0:
                raise
            events = await self._write_when_back(batch)
        if steps:  # journaled now (a replayed step never is again): charged once (gateway._usage)
            try:
                await self.host.usage.charge(self.run, steps, charged=batch.charged, entries=batch.usage)
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
        self.run.cost_usd = self._run_cost()
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
                    # Nobody saw its text: journaled without it (nor its calls), but charged and costed.
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

    def _run_cost(self) -> float | None:
        """The run's cost so far: its steps' (a refused step's too: its model was called)."""
        refused = [self._refused_step] if self._refused_step is not None else []
        return run_cost([*self._steps.values(), *refused])

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
        self.run.cost_usd = self._run_cost()
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
        self.run.cost_usd = self._run_cost()
        batch.events.append(
            self.event(RunFinishedEvent, status="awaiting-approval", usage=self.run.usage, cost_usd=self.run.cost_usd)
        )
        batch.release = True
        await self.write(batch)
        self.host.observe_run_finished(self.run, "awaiting-approval", time.perf_counter() - self._started)

    # -- tool calls ---------------------------------------------------------------------------------

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
