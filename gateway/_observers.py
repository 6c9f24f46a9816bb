"""``RuntimeObserver``: what a runtime tells metrics, logs and channels; ``ObserverFanOut`` tells them.

``RuntimeObserver`` is the public seam (``gateway.RuntimeObserver``); ``ObserverFanOut`` is a
part of ``Runtime`` (``gateway._runtime``) that calls each observer in turn.
"""

from __future__ import annotations

from ._guards import GuardDirection, GuardOutcome, VerdictKind
from .events import RunEvent, RunStatus, ToolOutcome
from .stores import ModelStepEntry, RunRecord

__all__ = ["ObserverFanOut", "RuntimeObserver"]


class RuntimeObserver:
    """Receives what the runtime does, for metrics and logs. Override what you need."""

    def run_started(self, run: RunRecord) -> None:
        """A run started or resumed on this process."""

    def run_finished(self, run: RunRecord, status: RunStatus, seconds: float) -> None:
        """A run ended or parked on this process after ``seconds`` of driving."""

    def tool_settled(self, run: RunRecord, tool: str, status: ToolOutcome, seconds: float) -> None:
        """A tool call settled (``completed``, ``failed``, ``denied`` or ``cancelled``)."""

    def model_step(self, run: RunRecord, seconds: float) -> None:
        """A model step finished."""

    def guard_verdict(self, run: RunRecord, direction: GuardDirection, guard: str, verdict: VerdictKind) -> None:
        """An input or output guard answered (``allow``, ``refuse``, ``rewrite`` or ``flag``)."""

    def usage_charged(self, run: RunRecord, step: ModelStepEntry) -> None:
        """A model step of ``run`` was charged to its actor's ledger (``step.usage``, ``step.cost_usd``)."""

    def quota_crossed(self, agent: str, period: str, outcome: str) -> None:
        """An actor of ``agent`` neared (``warning``) or used up (``exceeded``) a budget."""

    def events_written(self, thread_id: str, events: list[RunEvent]) -> None:
        """Events were written to the thread's log by this process (with their ``seq``).

        Called on the process that drives the run (or decides its approval), once per write:
        a channel that pushes to its clients (WhatsApp) delivers from here. Must not block:
        schedule the work.
        """


class ObserverFanOut:
    """Tells a runtime's observers what it did (a part of ``Runtime``)."""

    observers: list[RuntimeObserver]

    def observe_run_finished(self, run: RunRecord, status: RunStatus, seconds: float) -> None:
        """Tell observers a run ended or parked."""
        for observer in self.observers:
            observer.run_finished(run, status, seconds)

    def observe_tool(self, run: RunRecord, tool: str, status: ToolOutcome, seconds: float) -> None:
        """Tell observers a tool call settled."""
        for observer in self.observers:
            observer.tool_settled(run, tool, status, seconds)

    def observe_model_step(self, run: RunRecord, seconds: float) -> None:
        """Tell observers a model step finished."""
        for observer in self.observers:
            observer.model_step(run, seconds)

    def observe_guards(self, run: RunRecord, direction: GuardDirection, outcome: GuardOutcome | None) -> None:
        """Tell observers what each guard of one text answered."""
        for guard, verdict in outcome.verdicts if outcome is not None else ():
            for observer in self.observers:
                observer.guard_verdict(run, direction, guard, verdict)
