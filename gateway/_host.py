"""``RunHost``: the narrow seam between a run's driver and the runtime that hosts it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from tools import ToolRegistry

from .events import RunEvent, RunStatus, ToolOutcome
from .models import Model
from .stores import Batch, RunRecord, Store

if TYPE_CHECKING:
    from ._approvals import ApprovalFlow
    from ._attachments import AttachmentReader
    from ._guards import GuardDirection, GuardOutcome
    from ._handoffs import Handoffs
    from ._leases import Leases
    from ._usage import UsageMeter

__all__ = ["RunHost"]


class RunHost(Protocol):
    """What a driver needs of the runtime that hosts it, and nothing more.

    ``Runtime`` is the one host; a test may pass another. The lease rules live in ``leases``, the
    approval flow in ``approvals``: the driver asks them, it never decides those rules itself.
    """

    @property
    def registry(self) -> ToolRegistry:
        """Where the run's tools are gated, validated and invoked."""
        ...

    @property
    def store(self) -> Store:
        """Where the run's journal, approvals and history are read."""
        ...

    @property
    def model(self) -> Model | None:
        """The model of agents that name none."""
        ...

    @property
    def leases(self) -> Leases:
        """Holding the run's lease through a store outage."""
        ...

    @property
    def approvals(self) -> ApprovalFlow:
        """Requests and verdicts of the run's action calls."""
        ...

    @property
    def handoffs(self) -> Handoffs:
        """The run's handoff calls, its narration shown to its parent, what its end sets going."""
        ...

    @property
    def usage(self) -> UsageMeter:
        """Prices steps, charges them to the ledger and checks quotas before each step."""
        ...

    @property
    def store_retry(self) -> float:
        """Seconds a step is held while the store is away (``0``: stop at once)."""
        ...

    @property
    def attachment_reader(self) -> AttachmentReader | None:
        """Reads a turn's attachments (``None``: no media store; tools see no bytes)."""
        ...

    @property
    def closed(self) -> bool:
        """The host stopped: a held write gives up."""
        ...

    async def write(self, thread_id: str, batch: Batch) -> list[RunEvent]:
        """Write a batch of the run (observers hear of its events)."""
        ...

    def observe_tool(self, run: RunRecord, tool: str, status: ToolOutcome, seconds: float) -> None:
        """A tool call settled."""
        ...

    def observe_model_step(self, run: RunRecord, seconds: float) -> None:
        """A model step finished."""
        ...

    def observe_run_finished(self, run: RunRecord, status: RunStatus, seconds: float) -> None:
        """The run ended or parked."""
        ...

    def observe_guards(self, run: RunRecord, direction: GuardDirection, outcome: GuardOutcome | None) -> None:
        """An agent's guards answered on one text."""
        ...
