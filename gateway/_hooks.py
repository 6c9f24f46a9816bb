"""``EventHooks``: one dispatch from run events to a channel's ``on_<event>`` hooks.

Every channel turns the same event log into its own wire format. Rather than each writing a
``match`` over the fifteen event types, a channel subclasses ``EventHooks[T]`` and overrides the
hooks it shows; the others answer ``default(event)`` (nothing, unless the channel says otherwise).
``T`` is what one event becomes: frames, SSE chunks, messages to push.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from .events import (
    ApprovalRequestedEvent,
    ApprovalSettledEvent,
    GuardFlaggedEvent,
    MessageDequeuedEvent,
    MessageQueuedEvent,
    QuotaWarningEvent,
    RunErrorEvent,
    RunEvent,
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

__all__ = ["EventHooks"]

T = TypeVar("T")


class EventHooks(Generic[T]):
    """Dispatch each run event to its hook; a hook a subclass leaves alone answers ``default``.

    ``await hooks.dispatch(event)`` calls ``on_text_delta``, ``on_text_end``, ``on_tool_started``,
    ``on_tool_completed``, ``on_tool_failed``, ``on_tool_denied``, ``on_approval_requested``,
    ``on_approval_settled``, ``on_ui``, ``on_message_queued``, ``on_message_dequeued``,
    ``on_guard_flagged``, ``on_run_started``, ``on_run_finished``, ``on_run_error`` or ``on_quota_warning`` by
    the event's ``type``.
    ``handles(event)`` says whether a subclass overrides the hook of an event's type (a channel
    can skip the others without dispatching).
    """

    async def default(self, event: RunEvent) -> T:
        """What an event whose hook is not overridden becomes. Subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} has no hook for {event.type!r} events")

    async def on_run_started(self, event: RunStartedEvent) -> T:
        return await self.default(event)

    async def on_text_delta(self, event: TextDeltaEvent) -> T:
        return await self.default(event)

    async def on_text_end(self, event: TextEndEvent) -> T:
        return await self.default(event)

    async def on_tool_started(self, event: ToolStartedEvent) -> T:
        return await self.default(event)

    async def on_tool_completed(self, event: ToolCompletedEvent) -> T:
        return await self.default(event)

    async def on_tool_failed(self, event: ToolFailedEvent) -> T:
        return await self.default(event)

    async def on_tool_denied(self, event: ToolDeniedEvent) -> T:
        return await self.default(event)

    async def on_approval_requested(self, event: ApprovalRequestedEvent) -> T:
        return await self.default(event)

    async def on_approval_settled(self, event: ApprovalSettledEvent) -> T:
        return await self.default(event)

    async def on_ui(self, event: UiEvent) -> T:
        return await self.default(event)

    async def on_message_queued(self, event: MessageQueuedEvent) -> T:
        return await self.default(event)

    async def on_message_dequeued(self, event: MessageDequeuedEvent) -> T:
        return await self.default(event)

    async def on_guard_flagged(self, event: GuardFlaggedEvent) -> T:
        return await self.default(event)

    async def on_run_finished(self, event: RunFinishedEvent) -> T:
        return await self.default(event)

    async def on_run_error(self, event: RunErrorEvent) -> T:
        return await self.default(event)

    async def on_quota_warning(self, event: QuotaWarningEvent) -> T:
        return await self.default(event)

    def hook(self, event: RunEvent) -> Callable[[RunEvent], Awaitable[T]]:
        """The bound hook of ``event``'s type."""
        hook: Callable[[RunEvent], Awaitable[T]] = getattr(self, _HOOKS[event.type])
        return hook

    async def dispatch(self, event: RunEvent) -> T:
        """What ``event`` becomes on this channel."""
        return await self.hook(event)(event)

    def handles(self, event_type: str) -> bool:
        """Whether this class overrides the hook of ``event_type`` (a ``type`` such as ``"ui"``)."""
        name = _HOOKS.get(event_type)
        return name is not None and getattr(type(self), name) is not getattr(EventHooks, name)


_HOOKS = {
    "run-started": "on_run_started",
    "text-delta": "on_text_delta",
    "text-end": "on_text_end",
    "tool-started": "on_tool_started",
    "tool-completed": "on_tool_completed",
    "tool-failed": "on_tool_failed",
    "tool-denied": "on_tool_denied",
    "approval-requested": "on_approval_requested",
    "approval-settled": "on_approval_settled",
    "ui": "on_ui",
    "message-queued": "on_message_queued",
    "message-dequeued": "on_message_dequeued",
    "guard-flagged": "on_guard_flagged",
    "run-finished": "on_run_finished",
    "run-error": "on_run_error",
    "quota-warning": "on_quota_warning",
}
