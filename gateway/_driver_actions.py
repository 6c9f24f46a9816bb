"""``ActionSteps``: how a run's driver takes an action call: preflight, approval, execution.

A part of ``RunDriver`` (``gateway._driver``), kept apart for its size: the methods are the
driver's own and read its state.
"""

from __future__ import annotations

import asyncio
import logging

from pydantic import BaseModel

from tools import (
    PreflightCompleted,
    PreflightDenied,
    PreflightPhase,
    PreflightReady,
    Tool,
    ToolContext,
    ToolError,
    as_preflight_result,
)

from ._driver_parts import Driver, _UserCancelled
from ._tracing import approval_requested, approval_settled, tool_span
from ._transcript import error_value, jsonable
from .stores import Batch, PlannedCall, PreflightEntry

__all__ = ["ActionSteps"]

logger = logging.getLogger("gateway.run")

Preflight = PreflightReady | PreflightDenied | PreflightCompleted


class ActionSteps:
    """The action steps of ``RunDriver``."""

    async def _preflight(
        self: Driver,
        call: PlannedCall,
        tool: Tool,
        validated: BaseModel,
        ctx: ToolContext,
        phase: PreflightPhase,
        batch: Batch,
    ) -> Preflight:
        """Run (or replay from the journal) an action's preflight for ``phase``."""
        known = self._preflights.get((call.id, phase))
        if known is not None:
            return as_preflight_result(known.result)
        result = await self._guarded(self.host.registry.preflight(tool, validated, ctx, phase))
        entry = PreflightEntry(tool_call_id=call.id, phase=phase, result=jsonable(result.model_dump()))
        self._preflights[(call.id, phase)] = entry
        batch.journal.append(entry)
        if isinstance(result, PreflightCompleted):
            return result  # its output goes to present() as execute's would, made valid in _complete
        return as_preflight_result(entry.result)  # a reason or confirmation text made valid

    async def _prepared(
        self: Driver, call: PlannedCall, ctx: ToolContext, phase: PreflightPhase, batch: Batch
    ) -> tuple[Tool, BaseModel, PreflightReady] | None:
        """Gates, validation and the preflight of ``phase`` for an action call.

        Returns the tool, its input and the ready verdict; ``None`` when the call was settled
        here instead (refused by a gate or the preflight, or completed by it) and written.
        """
        try:
            tool, validated = await self._admit(call, ctx)
            verdict = await self._preflight(call, tool, validated, ctx, phase, batch)
        except ToolError as exc:
            self._settle(batch, call, "failed", error=error_value(exc.code, str(exc)))
        except (_UserCancelled, asyncio.CancelledError):
            raise
        except Exception as exc:
            logger.warning("preflight (%s) of %s failed", phase, call.name, exc_info=True)
            self._settle(batch, call, "failed", error=error_value("preflight_error", f"{type(exc).__name__}: {exc}"))
        else:
            if isinstance(verdict, PreflightReady):
                return tool, validated, verdict
            if isinstance(verdict, PreflightDenied):
                self._settle(batch, call, "denied", reason=verdict.reason)
            else:
                await self._complete(batch, call, tool, validated, ctx, verdict.output, done=verdict.done)
        await self.write(batch)
        return None

    async def _run_action(self: Driver, call: PlannedCall) -> bool:
        """One action call: prepare, ask, and (once approved) execute. True when parked.

        After the approval the gates, validation and the ``execute``-phase preflight run afresh:
        a tool switched off, or a state that changed, while the person decided stops it here.
        """
        with tool_span(call, "action", lambda: self._outcome(call.id)):
            return await self._run_action_traced(call)

    async def _run_action_traced(self: Driver, call: PlannedCall) -> bool:
        ctx = self._ctx(call)
        batch = Batch()
        prepared = await self._prepared(call, ctx, "prepare", batch)
        if prepared is None:
            return False
        decision = await self._decision(call, *prepared, batch)
        if decision == "park":
            return True
        if decision != "approved":
            self._settle(batch, call, "denied", reason=decision)
            await self.write(batch)
            return False
        approved = await self._prepared(call, ctx, "execute", batch)
        if approved is None:
            return False
        tool, validated, _ = approved
        batch.events.append(self._started_event(call, tool, validated))
        await self.write(batch)
        await self._execute(call, tool, validated, ctx)
        return False

    async def _decision(
        self: Driver, call: PlannedCall, tool: Tool, validated: BaseModel, verdict: PreflightReady, batch: Batch
    ) -> str:
        """``"approved"``, ``"park"``, or the denial reason the model will read."""
        approvals = self.host.approvals
        decided = await approvals.verdict(self.run, call.id, tool.name)
        batch.events.extend(decided.events)
        match decided.outcome:
            case "ask":
                data = validated.model_dump(mode="json")
                approval = approvals.request(self.run, call.id, tool, data, verdict)
                approval_requested(approval)
                await self._park(approval, batch)
                return "park"
            case "wait":
                approval_requested(None)
                await self._park(None, batch)
                return "park"
            case "approved":
                approval_settled(decided.approval, "approved")
                return "approved"
            case _:
                approval_settled(decided.approval, "denied")
                return decided.reason or "Not approved."
