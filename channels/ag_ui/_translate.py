"""``AgUiTranslator``: a thread's run events, one at a time, as ``ag_ui.core`` events.

Our run and an AG-UI run are not the same thing. One of our runs that parks for an approval and
resumes after it is two AG-UI runs: the first ends with ``RUN_FINISHED`` and an interrupt outcome,
the second (started by the client's ``resume``) carries the rest. The translator calls each such
stretch a *segment*: it opens one with ``RUN_STARTED`` at the first event that needs it and closes
it with ``RUN_FINISHED`` or ``RUN_ERROR``.

It is a state machine over the event log, so a stream can start anywhere: ``prime`` feeds it the
events a client already saw (nothing is emitted) and ``translate`` carries on from there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    CustomEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from gateway import EventHooks
from gateway import events as ours
from gateway.events import RunEvent

from ._resume import APPROVAL_RESPONSE_SCHEMA

__all__ = [
    "CUSTOM_APPROVAL_REQUESTED",
    "CUSTOM_APPROVAL_SETTLED",
    "CUSTOM_MESSAGE_DEQUEUED",
    "CUSTOM_MESSAGE_QUEUED",
    "CUSTOM_QUOTA_WARNING",
    "CUSTOM_UI",
    "AgUiTranslator",
    "RunNamer",
    "UiDeliverer",
]

CUSTOM_UI = "agora.ui"
"""``CUSTOM`` name of a component.

Its value: ``{id, component, version, props, toolCallId, form, fallbackText, html?, media?}``.
"""
CUSTOM_APPROVAL_REQUESTED = "agora.approval-requested"
"""``CUSTOM`` name of an approval request: ``{toolCallId, tool, input, confirmation, tone, approver, expiresAt}``."""
CUSTOM_APPROVAL_SETTLED = "agora.approval-settled"
"""``CUSTOM`` name of a decision: ``{toolCallId, status, decidedBy, via}``."""
CUSTOM_MESSAGE_QUEUED = "agora.message-queued"
"""``CUSTOM`` name of a message waiting in the thread's queue: ``{messageId, text, position, edited}``."""
CUSTOM_MESSAGE_DEQUEUED = "agora.message-dequeued"
"""``CUSTOM`` name of a message leaving the queue: ``{messageId, reason}`` (``started``, ``removed``, ``cleared``)."""
CUSTOM_QUOTA_WARNING = "agora.quota-warning"
"""``CUSTOM`` name of a token budget near its limit: ``{period, used, limit}`` (``day`` or ``month``)."""

_QUEUE_EVENTS = (ours.MessageQueuedEvent, ours.MessageDequeuedEvent)

UiDeliverer = Callable[[ours.UiEvent], Awaitable[dict[str, Any]]]
"""Gives the delivered form of a ``ui`` event: ``{form, fallbackText, html?, media?}``."""
RunNamer = Callable[[RunEvent], Awaitable[str]]
"""Gives the AG-UI ``runId`` of a segment from the event that opens it."""


def _ms(at: str) -> int | None:
    try:
        return int(datetime.fromisoformat(at).timestamp() * 1000)
    except ValueError:
        return None


def _compact(values: dict[str, Any]) -> dict[str, Any] | None:
    """``values`` without its ``None`` entries; ``None`` when nothing is left (no ``metadata: {}``)."""
    return {key: value for key, value in values.items() if value is not None} or None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class AgUiTranslator(EventHooks[list[BaseEvent]]):
    """Translates one thread's events into AG-UI events, segment by segment.

    Each of our event types has its ``on_<event>`` hook (``EventHooks``); ``translate`` wraps
    them with the segment bookkeeping and the timestamps.

    Args:
        thread_id: The thread (the AG-UI ``threadId``).
        deliver_ui: Renders a ``ui`` event for this client.
        name_run: The ``runId`` of a segment the translator opens itself (a re-attach);
            ``start`` names the segment of a client's own request.
    """

    def __init__(self, thread_id: str, *, deliver_ui: UiDeliverer, name_run: RunNamer) -> None:
        self.thread_id = thread_id
        self._deliver_ui = deliver_ui
        self._name_run = name_run
        self.run_id: str | None = None
        """The AG-UI ``runId`` of the open segment; ``None`` between segments."""
        self.agora_run_id: str | None = None
        """Our run of the open (or last) segment."""
        self.last_run_id: str | None = None
        """The AG-UI ``runId`` of the open or last segment."""
        self.opened_by: RunEvent | None = None
        """The event that opened the current segment (``None`` when ``start`` opened it)."""
        self._silent = False
        self._messages: set[str] = set()
        self._announced: set[str] = set()
        self._interrupts: dict[str, Interrupt] = {}
        self._errored: set[str] = set()

    @property
    def open(self) -> bool:
        """Whether a segment is open (``RUN_STARTED`` sent, no ``RUN_FINISHED`` / ``RUN_ERROR`` yet)."""
        return self.run_id is not None

    def start(self, run_id: str, agora_run_id: str | None) -> RunStartedEvent:
        """Open a segment for a client's request; return its ``RUN_STARTED``."""
        self.run_id = self.last_run_id = run_id
        self.agora_run_id = agora_run_id
        self.opened_by = None
        return RunStartedEvent(
            thread_id=self.thread_id,
            run_id=run_id,
            protocol_version=PROTOCOL_VERSION,
            timestamp=int(time.time() * 1000),
            metadata=_compact({"agoraRunId": agora_run_id}),
        )

    def reopen(self, run_id: str) -> list[BaseEvent]:
        """Open the primed segment again on a new stream: ``RUN_STARTED``, then messages in progress.

        A re-attaching client gets ``RUN_STARTED`` (and ``TEXT_MESSAGE_START`` for a message
        it was reading) before the rest, so the new stream is a well-formed run on its own. Both
        are stamped with the time of the re-attach: no event of ours stands behind them.
        """
        opened_by = self.opened_by
        started = self.start(run_id, self.agora_run_id)
        self.opened_by = opened_by
        out: list[BaseEvent] = [started]
        out.extend(
            TextMessageStartEvent(message_id=m, role="assistant", timestamp=started.timestamp)
            for m in sorted(self._messages)
        )
        return out

    def error(self, code: str, message: str) -> RunErrorEvent:
        """Close the open segment with a ``RUN_ERROR`` of our own (a refused resume, a failure)."""
        self.run_id = None
        return RunErrorEvent(message=message, code=code, timestamp=int(time.time() * 1000))

    async def prime(self, events: Iterable[RunEvent]) -> None:
        """Take in events the client already has: state only, nothing is emitted or rendered."""
        self._silent = True
        try:
            for event in events:
                await self.translate(event)
        finally:
            self._silent = False

    async def translate(self, event: RunEvent) -> list[BaseEvent]:
        """The AG-UI events for one of ours (none, one or several, in order)."""
        out: list[BaseEvent] = []
        if not self.open:
            if isinstance(event, ours.RunFinishedEvent) and event.run_id in self._errored:
                return out  # the RUN_ERROR before it already closed the segment
            if isinstance(event, _QUEUE_EVENTS):
                return out  # the queue between runs opens no segment: the run it starts will
            name = event.run_id if self._silent else await self._name_run(event)
            out.append(self.start(name, event.run_id))
            self.opened_by = event
        out.extend(await self.dispatch(event))
        stamp = _ms(event.at)
        for item in out:
            if item.timestamp is None:
                item.timestamp = stamp
        return out

    # -- the hooks: one per event type ----------------------------------------------------------------

    async def on_run_started(self, event: ours.RunStartedEvent) -> list[BaseEvent]:
        return []  # the segment's RUN_STARTED is written by ``translate``

    async def on_text_delta(self, event: ours.TextDeltaEvent) -> list[BaseEvent]:
        return [*self._open_message(event.message_id), self._content(event.message_id, event.delta)]

    async def on_text_end(self, event: ours.TextEndEvent) -> list[BaseEvent]:
        out = self._open_message(event.message_id)
        if out:  # the client never saw its pieces (a re-attach after them)
            out.append(self._content(event.message_id, event.text))
        self._messages.discard(event.message_id)
        return [*out, TextMessageEndEvent(message_id=event.message_id)]

    async def on_tool_started(self, event: ours.ToolStartedEvent) -> list[BaseEvent]:
        metadata: dict[str, Any] = {
            "kind": event.kind,
            "label": event.label,
            "running": event.running,
            "icon": event.icon,
        }
        return self._announce(event.tool_call_id, event.tool, event.input, metadata)

    async def on_tool_completed(self, event: ours.ToolCompletedEvent) -> list[BaseEvent]:
        metadata = {"status": "completed", "tool": event.tool, "done": event.done, "result": event.result}
        return self._result(event.tool_call_id, event.tool, event.output, metadata)

    async def on_tool_failed(self, event: ours.ToolFailedEvent) -> list[BaseEvent]:
        metadata = {"status": "failed", "tool": event.tool, "error": event.error}
        return self._result(event.tool_call_id, event.tool, {"error": event.error}, metadata)

    async def on_tool_denied(self, event: ours.ToolDeniedEvent) -> list[BaseEvent]:
        metadata = {"status": "denied", "tool": event.tool, "reason": event.reason}
        return self._result(event.tool_call_id, event.tool, {"denied": True, "reason": event.reason}, metadata)

    async def on_approval_requested(self, event: ours.ApprovalRequestedEvent) -> list[BaseEvent]:
        return self._approval_requested(event)

    async def on_approval_settled(self, event: ours.ApprovalSettledEvent) -> list[BaseEvent]:
        self._interrupts.pop(event.tool_call_id, None)
        value = {"toolCallId": event.tool_call_id, "status": event.status}
        value.update(_compact({"decidedBy": event.decided_by, "via": event.via}) or {})
        return [CustomEvent(name=CUSTOM_APPROVAL_SETTLED, value=value)]

    async def on_ui(self, event: ours.UiEvent) -> list[BaseEvent]:
        return await self._ui(event)

    async def on_message_queued(self, event: ours.MessageQueuedEvent) -> list[BaseEvent]:
        value = {"messageId": event.message_id, "text": event.text, "position": event.position, "edited": event.edited}
        return [CustomEvent(name=CUSTOM_MESSAGE_QUEUED, value=value)]

    async def on_guard_flagged(self, event: ours.GuardFlaggedEvent) -> list[BaseEvent]:
        return []  # for the operator (the metric, the event log), not for the app's person

    async def on_message_dequeued(self, event: ours.MessageDequeuedEvent) -> list[BaseEvent]:
        return [
            CustomEvent(name=CUSTOM_MESSAGE_DEQUEUED, value={"messageId": event.message_id, "reason": event.reason})
        ]

    async def on_quota_warning(self, event: ours.QuotaWarningEvent) -> list[BaseEvent]:
        value = {"period": event.period, "used": event.used, "limit": event.limit}
        return [CustomEvent(name=CUSTOM_QUOTA_WARNING, value=value)]

    async def on_run_error(self, event: ours.RunErrorEvent) -> list[BaseEvent]:
        self._errored.add(event.run_id)
        return [self.error(event.code, event.message)]

    async def on_run_finished(self, event: ours.RunFinishedEvent) -> list[BaseEvent]:
        return [self._finished(event)]

    # -- helpers ---------------------------------------------------------------------------------------

    def _open_message(self, message_id: str) -> list[BaseEvent]:
        if message_id in self._messages:
            return []
        self._messages.add(message_id)
        return [TextMessageStartEvent(message_id=message_id, role="assistant")]

    @staticmethod
    def _content(message_id: str, delta: str) -> TextMessageContentEvent:
        return TextMessageContentEvent(message_id=message_id, delta=delta)

    def _announce(
        self, call_id: str, tool: str, args: dict[str, Any] | None, metadata: dict[str, Any]
    ) -> list[BaseEvent]:
        """``TOOL_CALL_START/ARGS/END`` once per call: a resumed action is not announced again."""
        if call_id in self._announced:
            return []
        self._announced.add(call_id)
        out: list[BaseEvent] = [
            ToolCallStartEvent(tool_call_id=call_id, tool_call_name=tool, metadata=_compact(metadata))
        ]
        if args is not None:
            out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=_json(args)))
        out.append(ToolCallEndEvent(tool_call_id=call_id))
        return out

    def _result(self, call_id: str, tool: str, content: Any, metadata: dict[str, Any]) -> list[BaseEvent]:
        # A call can settle without having started (refused by a gate, denied by a preflight).
        out = self._announce(call_id, tool, None, {})
        out.append(
            ToolCallResultEvent(
                message_id=f"{call_id}-result",
                tool_call_id=call_id,
                role="tool",
                content=content if isinstance(content, str) else _json(content),
                metadata=_compact(metadata),
            )
        )
        return out

    def _approval_requested(self, event: ours.ApprovalRequestedEvent) -> list[BaseEvent]:
        confirmation = event.confirmation.model_dump(mode="json")
        metadata = {"kind": "action", "confirmation": confirmation, "tone": event.tone}
        out = self._announce(event.tool_call_id, event.tool, event.input, metadata)
        self._interrupts[event.tool_call_id] = Interrupt(
            id=event.tool_call_id,
            reason="tool_call",
            tool_call_id=event.tool_call_id,
            message=event.confirmation.title,
            response_schema=APPROVAL_RESPONSE_SCHEMA,
            expires_at=event.expires_at,
            metadata=_compact(
                {"tool": event.tool, "verb": event.confirmation.verb, "detail": event.confirmation.detail}
            ),
        )
        value = {
            "toolCallId": event.tool_call_id,
            "tool": event.tool,
            "input": event.input,
            "confirmation": confirmation,
            "tone": event.tone,
            "approver": event.approver,
            "expiresAt": event.expires_at,
        }
        out.append(CustomEvent(name=CUSTOM_APPROVAL_REQUESTED, value=value))
        return out

    async def _ui(self, event: ours.UiEvent) -> list[BaseEvent]:
        value: dict[str, Any] = {
            "id": event.id,
            "component": event.component,
            "version": event.version,
            "props": event.props,
            "toolCallId": event.tool_call_id,
        }
        if not self._silent:
            value.update(await self._deliver_ui(event))
        return [CustomEvent(name=CUSTOM_UI, value=value)]

    def _finished(self, event: ours.RunFinishedEvent) -> BaseEvent:
        run_id = self.run_id or event.run_id
        self.run_id = None
        self._messages.clear()
        if event.status == "failed":
            return RunErrorEvent(message="The run failed.", code="run_failed")
        outcome: RunFinishedSuccessOutcome | RunFinishedInterruptOutcome | RunFinishedCancelledOutcome | None
        match event.status:
            case "completed":
                outcome = RunFinishedSuccessOutcome()
            case "cancelled":
                outcome = RunFinishedCancelledOutcome()
            case _:
                interrupts, self._interrupts = list(self._interrupts.values()), {}
                # Without a request in sight (it cannot happen: it is written with the park) say
                # nothing rather than an interrupt outcome with no interrupt.
                outcome = RunFinishedInterruptOutcome(interrupts=interrupts) if interrupts else None
        usage = event.usage
        tokens = usage.input_tokens + usage.output_tokens
        return RunFinishedEvent(
            thread_id=self.thread_id,
            run_id=run_id,
            outcome=outcome,
            usage=[TokenUsage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, total_tokens=tokens)]
            if tokens
            else None,
            metadata={"agoraRunId": event.run_id, "status": event.status},
        )
