"""What the parts of a run's driver share: its signals, and the driver as its parts see it.

``RunDriver`` (``gateway._driver``) is one class in five modules: the loop, the journal and the
run's end; ``ModelSteps`` (``gateway._driver_model``), ``ToolSteps`` (``gateway._driver_tools``),
``ActionSteps`` (``gateway._driver_actions``) and ``HandoffSteps`` (``gateway._driver_handoffs``).
The parts' methods take ``self`` as ``Driver``, the members they use of the whole.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel

from tools import (
    AgentScope,
    AgoraError,
    AttachedFile,
    PreflightPhase,
    PreflightReady,
    Tool,
    ToolContext,
    ToolDefinition,
    UiComponent,
)

if TYPE_CHECKING:
    from ._agents import Agent, Handoff, Persona
    from ._driver_actions import Preflight
    from ._host import RunHost
    from .events import RunEvent, ToolStartedEvent, UiEvent
    from .models import AssistantMessage, Model, ToolMessage
    from .stores import (
        ApprovalRecord,
        Batch,
        ModelStepEntry,
        PlannedCall,
        PreflightEntry,
        RunRecord,
        Store,
        ToolSettledEntry,
    )

__all__ = ["Driver", "_PersonaFailed", "_StepNotStored", "_UserCancelled"]

T = TypeVar("T")


class Driver(Protocol):
    """The members of ``RunDriver`` that its parts use."""

    host: RunHost
    store: Store
    run: RunRecord
    agent: Agent
    model: Model
    persona: Persona | None
    scope: AgentScope
    cancel_requested: bool
    _instructions: str | None
    _offered: list[ToolDefinition] | None
    _output_refusal: str | None
    _running: dict[str, PlannedCall]
    _steps: dict[int, ModelStepEntry]
    _settled: dict[str, ToolSettledEntry]
    _preflights: dict[tuple[str, str], PreflightEntry]

    def event(self, cls: type[Any], **fields: Any) -> Any: ...
    def ui_event(self, item: UiComponent, call_id: str | None) -> UiEvent: ...
    async def write(self, batch: Batch) -> list[RunEvent]: ...
    async def _guarded(self, awaitable: Awaitable[T]) -> T: ...
    def _ctx(self, call: PlannedCall) -> ToolContext: ...
    async def _park(self, approval: ApprovalRecord | None, batch: Batch) -> None: ...
    async def _admit(self, call: PlannedCall, ctx: ToolContext) -> tuple[Tool, BaseModel]: ...
    def _settle(self, batch: Batch, call: PlannedCall, status: str, **fields: Any) -> None: ...
    def _started_event(self, call: PlannedCall, tool: Tool, validated: BaseModel) -> ToolStartedEvent: ...
    async def _run_reads(self, calls: list[PlannedCall], prefix: Batch) -> None: ...
    async def _execute(
        self, call: PlannedCall, tool: Tool, validated: BaseModel, ctx: ToolContext, *, guarded: bool = True
    ) -> None: ...
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
    ) -> None: ...
    async def _preflight(
        self, call: PlannedCall, tool: Tool, validated: BaseModel, ctx: ToolContext, phase: PreflightPhase, batch: Batch
    ) -> Preflight: ...
    async def _prepared(
        self, call: PlannedCall, ctx: ToolContext, phase: PreflightPhase, batch: Batch
    ) -> tuple[Tool, BaseModel, PreflightReady] | None: ...
    async def _decision(
        self, call: PlannedCall, tool: Tool, validated: BaseModel, verdict: PreflightReady, batch: Batch
    ) -> str: ...
    async def _run_action(self, call: PlannedCall) -> bool: ...
    async def _run_action_traced(self, call: PlannedCall) -> bool: ...
    def _outcome(self, call_id: str) -> str | None: ...
    def _handoff_of(self, name: str) -> Handoff | None: ...
    async def _run_with_handoffs(self, entry: ModelStepEntry, prefix: Batch) -> bool: ...
    def _attached_files(self) -> tuple[AttachedFile, ...]: ...
    async def _execute_all(self, admitted: list[tuple[PlannedCall, Tool, BaseModel, ToolContext]]) -> None: ...
    async def _execute_traced(
        self, call: PlannedCall, tool: Tool, validated: BaseModel, ctx: ToolContext, *, guarded: bool
    ) -> None: ...
    def _transcript(self) -> list[AssistantMessage | ToolMessage]: ...
    def _run_instructions(self) -> str: ...
    async def _definitions(self) -> list[ToolDefinition]: ...


class _UserCancelled(AgoraError):
    """A person asked to stop the run while a model call or a tool was in flight."""


class _PersonaFailed(AgoraError):
    """A persona's instructions function raised: the run fails (its message is logged)."""


class _StepNotStored(AgoraError):
    """The store refused a write of this run for good (not an outage): the run cannot go on."""
