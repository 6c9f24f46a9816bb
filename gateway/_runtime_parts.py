"""What the parts of a runtime share: its state enum, the Stop flag's key, the runtime as its parts see it.

``Runtime`` (``gateway._runtime``) is one class in five modules: the assembly, lifecycle, runs
and approvals; ``TurnStarts`` (``gateway._runtime_turns``), ``ThreadReads``
(``gateway._runtime_reads``), ``Sweeps`` (``gateway._runtime_sweeps``) and ``ObserverFanOut``
(``gateway._observers``). The parts' methods take ``self`` as ``RuntimeParts``, the members
they use of the whole.
"""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING, Protocol

from tools import Actor

if TYPE_CHECKING:
    from ._agents import Agent
    from ._approvals import ApprovalFlow, ApprovalPolicy
    from ._driver import RunDriver
    from ._guards import GuardDirection, GuardOutcome
    from ._handoffs import Handoffs
    from ._leases import Leases
    from ._observers import RuntimeObserver
    from ._personas import PersonaPins
    from ._queue import ThreadQueue
    from ._threads import Threads
    from ._usage import UsageMeter
    from .events import RunStatus, Turn
    from .models import AssistantMessage, ToolMessage, UserMessage
    from .stores import Batch, Begun, PlannedCall, RunRecord, Store, ThreadRecord

__all__ = ["_CANCEL_KEY", "RuntimeParts", "_State"]

_CANCEL_KEY = "agora-run-cancel:{run_id}"
"""A Stop for a run another process drives: it sees the flag on its next maintenance pass."""


class _State(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"


class RuntimeParts(Protocol):
    """The members of ``Runtime`` that its parts use."""

    store: Store
    agents: dict[str, Agent]
    default_agent: Agent
    instance_id: str
    lease_ttl: float
    maintenance_interval: float
    leases: Leases
    approvals: ApprovalFlow
    threads: Threads
    persona_pins: PersonaPins
    queue: ThreadQueue
    handoffs: Handoffs
    observers: list[RuntimeObserver]
    usage: UsageMeter
    _drivers: dict[str, RunDriver]
    _tasks: dict[str, asyncio.Task[RunStatus]]
    _state: _State

    @property
    def approval_policy(self) -> ApprovalPolicy: ...
    def _ensure_open(self) -> None: ...
    def agent_for(self, name: str | None, actor: Actor) -> Agent: ...
    def _agent_of(self, run: RunRecord) -> Agent: ...
    def observe_guards(self, run: RunRecord, direction: GuardDirection, outcome: GuardOutcome | None) -> None: ...
    def _spawn(
        self,
        run: RunRecord,
        agent: Agent,
        *,
        resume: bool,
        history: list[UserMessage | AssistantMessage | ToolMessage] | None = None,
    ) -> None: ...
    def _resume_claimed(self, run: RunRecord) -> None: ...
    async def _stop_active(self, thread_id: str, *, end_parked: bool = True) -> bool: ...
    # TurnStarts
    def _checked(self, turn: Turn) -> tuple[Turn, Agent]: ...
    async def _start_turn(self, turn: Turn) -> str: ...
    async def _begin(
        self, turn: Turn, agent: Agent, *, dequeue: str | None = None, direct_call: PlannedCall | None = None
    ) -> str: ...
    async def _pin(self, thread_id: str, agent: str, persona: str) -> None: ...
    async def _begin_record(
        self, run: RunRecord, thread: ThreadRecord, batch: Batch, history_limit: int | None
    ) -> Begun: ...
    async def drain(self, thread_id: str) -> str | None: ...
    async def _drain_head(self, thread_id: str) -> tuple[str, str] | None: ...
    # Sweeps
    async def sweep(self) -> None: ...
    async def _sweep(self) -> None: ...
