"""``TaskView``: a run's events folded into an A2A task, and the stream events on the way.

The mapping (our event -> A2A):

========================  ===============================================================
``run-started``           ``statusUpdate`` WORKING
``tool-started``          ``statusUpdate`` WORKING with the tool's ``running`` narration
``tool-completed``        ``statusUpdate`` WORKING with the ``done`` narration
``tool-failed/denied``    ``statusUpdate`` WORKING with the error or the reason
``text-end``              ``artifactUpdate``: a text artifact (``text-<message_id>``)
``ui``                    ``artifactUpdate``: a component artifact (``ui-<id>``, replaced in
                          place when the id repeats): data part + image/PDF file part
``approval-requested``    remembered; the run parks next
``approval-settled``      ``statusUpdate`` WORKING (the run resumes)
``run-finished``          ``statusUpdate`` COMPLETED (with the last text), CANCELED, FAILED
                          (with the error), or INPUT_REQUIRED (with the approval prompt)
``text-delta``            nothing: text arrives whole at ``text-end``
``quota-warning``         ``statusUpdate`` WORKING saying how much of the budget is used
========================  ===============================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field

from a2a.types import (
    Artifact,
    Message,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from gateway import EventHooks, RunEvent
from gateway.events import (
    ApprovalRequestedEvent,
    ApprovalSettledEvent,
    GuardFlaggedEvent,
    MessageDequeuedEvent,
    MessageQueuedEvent,
    QuotaWarningEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextDeltaEvent,
    TextEndEvent,
    ToolCompletedEvent,
    ToolDeniedEvent,
    ToolFailedEvent,
    ToolStartedEvent,
    UiEvent,
)

from ._book import TaskRecord
from ._inbound import OutputModes
from ._parts import UiParts, agent_message, approval_message, struct
from ._proto import from_json

__all__ = ["INTERRUPTED_STATES", "TERMINAL_STATES", "StreamEvent", "TaskView", "state_of_run"]

StreamEvent = Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent
"""What a stream carries (``Message`` never: every answer is a task)."""

TERMINAL_STATES = frozenset(
    {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_FAILED}
)
INTERRUPTED_STATES = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED})

_FINISHED = {
    "completed": TaskState.TASK_STATE_COMPLETED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
    "failed": TaskState.TASK_STATE_FAILED,
    "awaiting-approval": TaskState.TASK_STATE_INPUT_REQUIRED,
}
_RUN_STATES = {**_FINISHED, "running": TaskState.TASK_STATE_WORKING}
_SETTLED = {"approved": "Approved.", "rejected": "Rejected.", "expired": "The approval expired."}


def state_of_run(status: str) -> TaskState:
    """The task state of a run status (``running``, ``awaiting-approval``, ``completed``...)."""
    return _RUN_STATES.get(status, TaskState.TASK_STATE_WORKING)


@dataclass(kw_only=True, eq=False)
class TaskView(EventHooks[list[StreamEvent]]):
    """One task as its run's events build it; ``apply`` each event in order, read ``task()``.

    Each event type has its ``on_<event>`` hook (``EventHooks``), which returns what a stream
    sends for it; the table above is theirs.
    """

    record: TaskRecord
    ui: UiParts
    modes: OutputModes
    state: TaskState = TaskState.TASK_STATE_SUBMITTED
    timestamp: str | None = None
    message: Message | None = None
    """The status message."""
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    replies: list[tuple[int, Message]] = field(default_factory=list)
    """The agent's prompts and final messages with their ``seq``, for the history."""
    _pending: ApprovalRequestedEvent | None = None
    _last_text: str | None = None
    _error: RunErrorEvent | None = None
    _stopped: bool = False

    def stopped(self) -> bool:
        """Whether the run stopped (ended or parked) at the last event applied."""
        return self._stopped

    def _message(self, message_id: str, text: str) -> Message:
        return agent_message(message_id, self.record.task_id, self.record.context_id, [Part(text=text)])

    def _status(self, event: RunEvent, state: TaskState, message: Message | None) -> TaskStatusUpdateEvent:
        self.state, self.timestamp, self.message = state, event.at, message
        return TaskStatusUpdateEvent(
            task_id=self.record.task_id, context_id=self.record.context_id, status=self._task_status()
        )

    def _working(self, event: RunEvent, text: str | None = None) -> TaskStatusUpdateEvent:
        message = self._message(f"status-{event.seq}", text) if text else None
        return self._status(event, TaskState.TASK_STATE_WORKING, message)

    def _artifact(self, artifact: Artifact) -> TaskArtifactUpdateEvent:
        self.artifacts[artifact.artifact_id] = artifact
        return TaskArtifactUpdateEvent(
            task_id=self.record.task_id, context_id=self.record.context_id, artifact=artifact, last_chunk=True
        )

    def _task_status(self) -> TaskStatus:
        status = TaskStatus(state=self.state)
        if self.message is not None:
            status.message.CopyFrom(self.message)
        if self.timestamp:
            status.timestamp.FromJsonString(self.timestamp)
        return status

    async def apply(self, event: RunEvent) -> list[StreamEvent]:
        """Take the run's next event; return what a stream sends for it."""
        self._stopped = False
        return await self.dispatch(event)

    # -- the hooks: one per event type ----------------------------------------------------------------

    async def on_run_started(self, event: RunStartedEvent) -> list[StreamEvent]:
        return [self._working(event)]

    async def on_text_delta(self, event: TextDeltaEvent) -> list[StreamEvent]:
        return []  # text arrives whole at text-end

    async def on_message_queued(self, event: MessageQueuedEvent) -> list[StreamEvent]:
        return []  # another message waiting behind this task is not this task's

    async def on_guard_flagged(self, event: GuardFlaggedEvent) -> list[StreamEvent]:
        return []  # for the operator (the metric, the event log), not part of the task

    async def on_message_dequeued(self, event: MessageDequeuedEvent) -> list[StreamEvent]:
        return []  # the task's own message leaving the queue: its run-started follows

    async def on_text_end(self, event: TextEndEvent) -> list[StreamEvent]:
        self._last_text = event.text
        artifact = Artifact(artifact_id=f"text-{event.message_id}", name="text", parts=[Part(text=event.text)])
        return [self._artifact(artifact)]

    async def on_tool_started(self, event: ToolStartedEvent) -> list[StreamEvent]:
        return [self._working(event, event.running)]

    async def on_tool_completed(self, event: ToolCompletedEvent) -> list[StreamEvent]:
        return [self._working(event, event.done)]

    async def on_tool_failed(self, event: ToolFailedEvent) -> list[StreamEvent]:
        return [self._working(event, event.error.get("message") or "The tool failed.")]

    async def on_tool_denied(self, event: ToolDeniedEvent) -> list[StreamEvent]:
        return [self._working(event, event.reason)]

    async def on_ui(self, event: UiEvent) -> list[StreamEvent]:
        return [await self._ui(event)]

    async def on_approval_requested(self, event: ApprovalRequestedEvent) -> list[StreamEvent]:
        self._pending = event  # the run parks next: its run-finished carries the prompt
        return []

    async def on_approval_settled(self, event: ApprovalSettledEvent) -> list[StreamEvent]:
        self._pending = None
        return [self._working(event, _SETTLED[event.status])]

    async def on_quota_warning(self, event: QuotaWarningEvent) -> list[StreamEvent]:
        name = "monthly" if event.period == "month" else "daily"
        share = min(100, int(100 * event.used / event.limit)) if event.limit else 100
        return [self._working(event, f"You have used {share}% of your {name} allowance of the assistant.")]

    async def on_run_error(self, event: RunErrorEvent) -> list[StreamEvent]:
        self._error = event  # its run-finished (failed) carries the message
        return []

    async def on_run_finished(self, event: RunFinishedEvent) -> list[StreamEvent]:
        return [self._finish(event)]

    # -- helpers ---------------------------------------------------------------------------------------

    async def _ui(self, event: UiEvent) -> TaskArtifactUpdateEvent:
        artifact = Artifact(
            artifact_id=f"ui-{event.id}",
            name=event.component,
            parts=await self.ui.parts(event, self.modes),
            metadata=struct(
                {
                    "component": event.component,
                    "version": event.version,
                    "toolCallId": event.tool_call_id,
                    "fallbackText": event.fallback_text,
                }
            ),
        )
        return self._artifact(artifact)

    def _finish(self, event: RunFinishedEvent) -> TaskStatusUpdateEvent:
        self._stopped = True
        state = _FINISHED[event.status]
        message: Message | None = None
        if event.status == "awaiting-approval" and self._pending is not None:
            message = approval_message(self._pending, self.record.task_id, self.record.context_id)
        elif event.status == "completed" and self._last_text:
            message = self._message(f"final-{event.seq}", self._last_text)
        elif event.status == "failed":
            text = self._error.message if self._error is not None else "The task failed."
            message = self._message(f"final-{event.seq}", text)
        if message is not None:
            self.replies.append((event.seq, message))
        return self._status(event, state, message)

    def task(self, *, history: bool = True) -> Task:
        """The task as it stands."""
        task = Task(id=self.record.task_id, context_id=self.record.context_id, status=self._task_status())
        task.artifacts.extend(self.artifacts.values())
        if history:
            task.history.extend(message for _, message in self._history())
        return task

    def _history(self) -> list[tuple[float, Message]]:
        items: list[tuple[float, Message]] = []
        for sent in self.record.messages:
            message = from_json(sent.message, Message())
            items.append((sent.after_seq + 0.5, message))
        items.extend((float(seq), message) for seq, message in self.replies)
        return sorted(items, key=lambda item: item[0])
