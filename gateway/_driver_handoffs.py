"""``HandoffSteps``: how a run's driver hands calls to sub-agents (``gateway._handoffs``).

A part of ``RunDriver`` (``gateway._driver``), kept apart for its size: the methods are the
driver's own and read its state.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ._agents import Handoff
from ._driver_parts import Driver, _UserCancelled
from ._handoff_parts import handoff_of
from .events import ToolCompletedEvent
from .stores import Batch, ModelStepEntry, PlannedCall, ToolSettledEntry

if TYPE_CHECKING:
    from ._driver import RunDriver

__all__ = ["HandoffSteps"]

T = TypeVar("T")


class HandoffSteps:
    """The handoff steps of ``RunDriver``."""

    async def _run_with_handoffs(self: Driver, entry: ModelStepEntry, prefix: Batch) -> bool:
        """A step that hands work to other agents: its calls one by one, in order (``gateway._handoffs``)."""
        registry = self.host.registry
        if prefix.events or prefix.journal:
            await self.write(prefix)
        for call in entry.calls:
            if self.cancel_requested:
                raise _UserCancelled
            if call.id in self._settled:
                continue
            handoff = self._handoff_of(call.name)
            tool = registry.get(call.name) if handoff is None else None
            if handoff is not None:
                if await self.host.handoffs.run_call(cast("RunDriver", self), call, handoff):
                    return True
            elif tool is None or tool.kind == "read":
                await self._run_reads([call], Batch())
            elif await self._run_action(call):
                return True
        return False

    def _handoff_of(self: Driver, name: str) -> Handoff | None:
        """The agent's handoff of that tool name, unless the run's persona leaves it out (``allowed_tools``)."""
        handoff = handoff_of(self.agent, name)
        allowed = self.persona.allowed_tools if self.persona is not None else None
        if handoff is None or allowed is None or name in allowed:
            return handoff
        return None

    def handoff_calls(self: Driver) -> list[tuple[PlannedCall, Handoff]]:
        """The run's handoff calls so far, with their handoffs."""
        found: list[tuple[PlannedCall, Handoff]] = []
        for entry in self._steps.values():
            for call in entry.calls:
                handoff = self._handoff_of(call.name)
                if handoff is not None:
                    found.append((call, handoff))
        return found

    async def settle_handoff(
        self: Driver,
        call: PlannedCall,
        status: str,
        *,
        output: Any = None,
        error: dict[str, str] | None = None,
        done: str = "",
    ) -> None:
        """Settle a handoff call (``completed`` with ``output``, or ``failed`` with ``error``) and write it."""
        batch = Batch()
        if status == "completed":
            entry = ToolSettledEntry(tool_call_id=call.id, name=call.name, status="completed", output=output)
            self._settled[call.id] = entry
            batch.journal.append(entry)
            batch.events.append(
                self.event(ToolCompletedEvent, tool_call_id=call.id, tool=call.name, output=output, done=done)
            )
        else:
            self._settle(batch, call, "failed", error=error)
        await self.write(batch)
        self.host.observe_tool(self.run, call.name, "completed" if status == "completed" else "failed", 0.0)

    async def wait_handoff(self: Driver, call: PlannedCall, waiting: Awaitable[T]) -> T:
        """Wait for a sub-agent as for a tool: a Stop interrupts it (the call then fails as cancelled)."""
        self._running[call.id] = call
        try:
            return await self._guarded(waiting)
        finally:
            self._running.pop(call.id, None)

    async def park_for_child(self: Driver) -> None:
        """Park while a sub-agent waits for an approval (no approval of this run's own)."""
        await self._park(None, Batch())
        await self.host.handoffs.note_parked(self.run)
