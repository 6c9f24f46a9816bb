"""``ToolSteps``: how a run's driver runs a step's tool calls: gates, validation, execution, results.

A part of ``RunDriver`` (``gateway._driver``), kept apart for its size: the methods are the
driver's own and read its state. Read calls of one step run concurrently; an action goes through
``ActionSteps`` (``gateway._driver_actions``), a handoff through ``HandoffSteps``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from tools import (
    AttachedFile,
    Tool,
    ToolContext,
    ToolError,
    ToolFailed,
    ToolInputInvalidError,
    fill_result_view,
    narrate_done,
    narrate_running,
)

from ._collector import UiCollector
from ._driver_parts import Driver, _StepNotStored, _UserCancelled
from ._errors import StoreUnavailableError
from ._tracing import tool_span
from ._transcript import error_value, jsonable
from .events import Attachment, ToolCompletedEvent, ToolDeniedEvent, ToolFailedEvent, ToolStartedEvent
from .stores import Batch, ModelStepEntry, PlannedCall, ToolSettledEntry

if TYPE_CHECKING:
    from ._attachments import AttachmentReader

__all__ = ["UNKNOWN_TOOL", "ToolSteps"]

logger = logging.getLogger("gateway.run")

UNKNOWN_TOOL = "(unknown)"
"""What observers hear as the tool of a call that names no registered tool."""


class ToolSteps:
    """The tool-call steps of ``RunDriver``."""

    def _ctx(self: Driver, call: PlannedCall) -> ToolContext:
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

    def _attached_files(self: Driver) -> tuple[AttachedFile, ...]:
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

    async def _run_calls(self: Driver, entry: ModelStepEntry, prefix: Batch) -> bool:
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

    async def _admit(self: Driver, call: PlannedCall, ctx: ToolContext) -> tuple[Tool, BaseModel]:
        """Gates and validation for one call; raises ``ToolError`` when it may not run."""
        tool = await self.host.registry.check(call.name, ctx, self.scope)
        if call.args is None:
            raise ToolInputInvalidError(
                f"Arguments for tool {call.name!r} are not a JSON object: {call.arguments[:200]}", tool=call.name
            )
        return tool, tool.validate_input(call.args)

    def _settle(self: Driver, batch: Batch, call: PlannedCall, status: str, **fields: Any) -> None:
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

    def _started_event(self: Driver, call: PlannedCall, tool: Tool, validated: BaseModel) -> ToolStartedEvent:
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

    async def _run_reads(self: Driver, calls: list[PlannedCall], prefix: Batch) -> None:
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

    async def _execute_all(self: Driver, admitted: list[tuple[PlannedCall, Tool, BaseModel, ToolContext]]) -> None:
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
        self: Driver, call: PlannedCall, tool: Tool, validated: BaseModel, ctx: ToolContext, *, guarded: bool = True
    ) -> None:
        """Run ``execute``, then ``present``, and write the outcome with its ``ui`` events.

        A Stop interrupts the call (the driver settles it as cancelled); ``guarded=False`` is for
        calls in a task group, whose whole group is guarded instead.
        """
        with tool_span(call, tool.kind, lambda: self._outcome(call.id)):
            await self._execute_traced(call, tool, validated, ctx, guarded=guarded)

    def _outcome(self: Driver, call_id: str) -> str | None:
        settled = self._settled.get(call_id)
        return settled.status if settled is not None else None

    async def _execute_traced(
        self: Driver, call: PlannedCall, tool: Tool, validated: BaseModel, ctx: ToolContext, *, guarded: bool
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
        self: Driver,
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
