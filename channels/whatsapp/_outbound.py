"""Delivering a thread's events to WhatsApp, from whichever process wrote them.

``WhatsAppDelivery`` is a ``RuntimeObserver``: every process that writes events (the one running
a turn, the one that took a web decision and resumed the run, the one expiring an approval) is
told, and schedules a drain of that thread. A drain holds the thread's delivery lease in the
store, reads the event log after the thread's cursor, turns each event into messages and moves
the cursor after each message sent, so a crash or a failed send resumes where it stopped:
nothing is lost and nothing is sent twice (but for a request Twilio accepted whose answer never
came back: Twilio's Messages API has no idempotency key).

What is sent for each event:

- ``text-end``: the assistant's text, Markdown converted, split at 1600 characters;
- ``tool-started``: ``⏳ running…``, only when the call is still going after ``slow_after``;
- ``tool-completed``: ``✓ done``, with the result's metrics when the tool has a result view;
- ``approval-requested``: quick-reply buttons (``ApprovalButtons``);
- ``approval-settled``: the outcome, when decided elsewhere (the web...) or expired;
- ``ui``: the component as one image or PDF per message with its text as caption, or as text;
- ``run-error``: an apology. Tool denials and failures are left for the agent's reply to word.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway import GatewayServices, RuntimeObserver
from gateway.events import (
    ApprovalRequestedEvent,
    ApprovalSettledEvent,
    RunErrorEvent,
    RunEvent,
    TextEndEvent,
    ToolCompletedEvent,
    ToolDeniedEvent,
    ToolFailedEvent,
    ToolStartedEvent,
    UiEvent,
)
from tools import UiCapabilities

from ._approvals import ApprovalButtons
from ._markdown import split_message, to_whatsapp
from ._sender import OutboundMessage, TwilioSender, WhatsAppSendError
from ._state import DAY, ChannelState, Conversation, Cursor
from ._texts import WhatsAppTexts

__all__ = ["WHATSAPP_CAPABILITIES", "DeliveryOptions", "WhatsAppDelivery"]

logger = logging.getLogger("channels.whatsapp.delivery")

WHATSAPP_CAPABILITIES = UiCapabilities(formats=["image", "pdf", "text"])
"""What a WhatsApp conversation shows: images, then PDFs, then text (DESIGN section 5)."""

_DELIVERED = frozenset(
    {"text-end", "tool-started", "tool-completed", "approval-requested", "approval-settled", "ui", "run-error"}
)
_SILENT_VIA = frozenset({"whatsapp", "superseded", "cancelled"})
"""Decisions the WhatsApp person saw happen (their tap, their next message, their Stop)."""
_MAX_CAPTION = 1024
_NOT_OURS_FOR = 10.0


@dataclass(frozen=True, kw_only=True)
class DeliveryOptions:
    """Timing of delivery; tests shrink these."""

    slow_after: float = 2.0
    """Seconds a tool call runs before its ``running`` line is sent."""
    lock_ttl: float = 120.0
    """Seconds a process's delivery lease on a thread lasts without renewal."""
    lock_retry: float = 0.25
    """Seconds before trying again when another process holds a thread's lease."""
    redeliver_after: float = 30.0
    """Seconds before a message whose sends all failed is tried again."""
    max_rounds: int = 5
    """Failed rounds (each a full ``RetryPolicy``) before a message is given up on and recorded."""
    max_status_resends: int = 2
    """Resends of a message whose status callback reports a retryable failure (``StatusCallbacks``)."""
    window: float = DAY - 60
    """The customer-service window: free-form messages only this long after the last inbound."""
    capabilities: UiCapabilities = WHATSAPP_CAPABILITIES
    """What the conversations show (``formats=["text"]`` sends every component as text)."""


@dataclass(frozen=True)
class _Undeliverable:
    reason: str


Part = OutboundMessage | _Undeliverable


class WhatsAppDelivery(RuntimeObserver):
    """Sends each WhatsApp thread's events to its sender, once and in order."""

    def __init__(
        self,
        *,
        services: GatewayServices,
        state: ChannelState,
        sender: TwilioSender,
        buttons: ApprovalButtons,
        texts_for: Callable[[str | None], WhatsAppTexts],
        options: DeliveryOptions | None = None,
    ) -> None:
        self.services = services
        self.state = state
        self.sender = sender
        self.buttons = buttons
        self.texts_for = texts_for
        self.options = options or DeliveryOptions()
        self.owner = f"{services.runtime.instance_id}:wa:{uuid.uuid4().hex[:6]}"
        self._drainers: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._not_ours: dict[str, float] = {}
        self._contended: dict[str, int] = {}
        self._closed = False

    # -- lifecycle ----------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop: cancel timers, drains and resends (their cursors keep what was sent)."""
        self._closed = True
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        tasks = [*self._drainers.values(), *self._tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._drainers.clear()
        self._tasks.clear()

    def spawn(self, work: Coroutine[Any, Any, Any], name: str) -> None:
        """Run ``work`` in a task this delivery owns (cancelled and awaited by ``aclose``)."""
        if self._closed:
            work.close()
            return
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def idle(self) -> None:
        """Wait until no drain or owned task runs (timers set for later may still be pending)."""
        while self._drainers or self._tasks:
            await asyncio.gather(*self._drainers.values(), *self._tasks, return_exceptions=True)

    # -- scheduling ---------------------------------------------------------------------------------

    def events_written(self, thread_id: str, events: list[RunEvent]) -> None:
        """Schedule a drain of the thread when it wrote something WhatsApp shows."""
        if self._closed or not any(event.type in _DELIVERED for event in events):
            return
        if self._not_ours.get(thread_id, 0.0) > time.monotonic():
            return
        self.notify(thread_id)

    def bound(self, thread_id: str) -> None:
        """A thread became a WhatsApp conversation here: forget that it was not one."""
        self._not_ours.pop(thread_id, None)

    def notify(self, thread_id: str) -> None:
        """Drain the thread now (or right after the drain in progress)."""
        if self._closed:
            return
        timer = self._timers.pop(thread_id, None)
        if timer is not None:
            timer.cancel()  # this drain does what it was set for (and sets another if need be)
        running = self._drainers.get(thread_id)
        if running is not None and not running.done():
            self._dirty.add(thread_id)
            return
        task = asyncio.create_task(self._run(thread_id), name=f"agora-wa-deliver-{thread_id}")
        self._drainers[thread_id] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._drainers.get(thread_id) is done:
                del self._drainers[thread_id]

        task.add_done_callback(forget)

    def _later(self, thread_id: str, delay: float) -> None:
        """Drain the thread again in ``delay`` seconds (keeping an earlier timer if one is set)."""
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + max(0.0, delay)
        current = self._timers.get(thread_id)
        if current is not None and not current.cancelled() and current.when() <= when:
            return
        if current is not None:
            current.cancel()
        self._timers[thread_id] = loop.call_at(when, self.notify, thread_id)

    async def _run(self, thread_id: str) -> None:
        while True:
            self._dirty.discard(thread_id)
            try:
                await self.drain(thread_id)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("delivering thread %s failed; trying again later", thread_id)
                self._later(thread_id, self.options.redeliver_after)
            if thread_id not in self._dirty:
                return

    # -- draining -----------------------------------------------------------------------------------

    async def drain(self, thread_id: str) -> None:
        """Deliver the thread's events after its cursor, under the thread's delivery lease."""
        conversation = await self.state.conversation(thread_id)
        if conversation is None:
            now = time.monotonic()
            if len(self._not_ours) > 10_000:
                self._not_ours = {t: until for t, until in self._not_ours.items() if until > now}
            self._not_ours[thread_id] = now + _NOT_OURS_FOR
            return
        if not await self.state.lock(thread_id, self.owner, self.options.lock_ttl):
            # Another process delivers this thread: look again soon, less often while it lasts
            # (a process that died holding the lease frees it after lock_ttl).
            tries = self._contended[thread_id] = self._contended.get(thread_id, 0) + 1
            self._later(thread_id, min(self.options.lock_retry * 2 ** min(tries - 1, 10), 5.0))
            return
        self._contended.pop(thread_id, None)
        try:
            await self._drain_locked(conversation)
        finally:
            with contextlib.suppress(Exception):
                await self.state.unlock(thread_id, self.owner)

    async def _drain_locked(self, conversation: Conversation) -> None:
        store = self.services.runtime.store
        thread_id = conversation.thread_id
        cursor = await self.state.cursor(thread_id)
        if cursor is None:
            cursor = Cursor(seq=await store.last_seq(thread_id))
            logger.warning("thread %s had no delivery cursor; delivering from seq %d", thread_id, cursor.seq)
            await self.state.save_cursor(thread_id, cursor)
        while True:
            events = await store.read_events(thread_id, cursor.seq, limit=100)
            for unit in _units(events, resume=cursor.unit if cursor.part else None):
                wait = await self._deliver(conversation, unit, cursor)
                if wait is not None:
                    await self.state.save_cursor(thread_id, cursor)
                    self._later(thread_id, wait)
                    return
            if events:
                await self.state.save_cursor(thread_id, cursor)
            if len(events) < 100:
                return

    async def _deliver(self, conversation: Conversation, unit: list[RunEvent], cursor: Cursor) -> float | None:
        """Send what ``unit`` needs from ``cursor.part`` on; seconds to wait before retrying, or None."""
        parts: list[tuple[RunEvent, Part]] = []
        for event in unit:
            if event.type not in _DELIVERED:
                continue
            made = await self._parts(conversation, event)
            if isinstance(made, float):
                return made
            parts.extend((event, part) for part in made)
        thread_id = conversation.thread_id
        for index in range(cursor.part, len(parts)):
            event, part = parts[index]
            failure = await self._send(conversation, event, index, part, cursor)
            if failure is not None:
                return failure
            cursor.part, cursor.failures, cursor.unit = index + 1, 0, [e.seq for e in unit]
            await self.state.save_cursor(thread_id, cursor)
        cursor.seq, cursor.part, cursor.failures, cursor.unit = max(e.seq for e in unit), 0, 0, None
        if parts:
            await self.state.save_cursor(thread_id, cursor)
            await self.state.renew(thread_id, self.owner, self.options.lock_ttl)
        # else: saved with the page, or with the next message sent
        return None

    async def _send(
        self, conversation: Conversation, event: RunEvent, index: int, part: Part, cursor: Cursor
    ) -> float | None:
        """Send one part; a delay when it must be tried again later, else ``None`` (sent or recorded)."""
        thread_id = conversation.thread_id
        where = {"seq": event.seq, "part": index, "event": event.type}
        if isinstance(part, _Undeliverable):
            logger.warning("thread %s seq %d: not sent to %s: %s", thread_id, event.seq, conversation.e164, part.reason)
            await self.state.record_failure(thread_id, {**where, "reason": part.reason})
            return None
        try:
            sid = await self.sender.send(part)
        except WhatsAppSendError as exc:
            if exc.retryable and cursor.failures + 1 < self.options.max_rounds:
                cursor.failures += 1
                await self.state.save_cursor(thread_id, cursor)
                logger.warning(
                    "thread %s seq %d part %d: %s; round %d of %d, next in %.1f s",
                    thread_id,
                    event.seq,
                    index,
                    exc,
                    cursor.failures,
                    self.options.max_rounds,
                    self.options.redeliver_after,
                )
                return self.options.redeliver_after
            reason = "gave_up" if exc.retryable else "refused"
            logger.error("thread %s seq %d part %d %s: %s", thread_id, event.seq, index, reason, exc)
            await self.state.record_failure(
                thread_id,
                {
                    **where,
                    "reason": reason,
                    "error": str(exc),
                    "twilio_code": exc.twilio_code,
                    "message": part.to_json(),
                },
            )
            return None
        await self.state.record_sent(sid, {"thread_id": thread_id, **where, "message": part.to_json(), "resends": 0})
        return None

    # -- events to messages -------------------------------------------------------------------------

    async def _parts(self, conversation: Conversation, event: RunEvent) -> list[Part] | float:
        """The messages of one event, or seconds to wait before deciding (a tool just started)."""
        texts = self.texts_for(conversation.language)
        to = conversation.to
        match event:
            case ApprovalRequestedEvent():
                return await self._approval(conversation, event, texts)
            case ToolStartedEvent():
                return await self._running(conversation, event)
        last = await self.state.last_inbound(conversation.e164)
        if last is None or time.time() - last > self.options.window:
            return [_Undeliverable("outside_window")]
        match event:
            case TextEndEvent():
                return [OutboundMessage(to=to, body=body) for body in split_message(to_whatsapp(event.text))]
            case ToolCompletedEvent():
                return [OutboundMessage(to=to, body=f"✓ {event.done}{_result_line(event.result)}")]
            case ApprovalSettledEvent():
                return await self._settled(conversation, event, texts)
            case UiEvent():
                return await self._ui(conversation, event)
            case RunErrorEvent():
                return [OutboundMessage(to=to, body=texts.failed)]
        return []

    async def _approval(
        self, conversation: Conversation, event: ApprovalRequestedEvent, texts: WhatsAppTexts
    ) -> list[Part]:
        pending = await self.services.runtime.pending_approvals(conversation.thread_id)
        ids = [a.tool_call_id for a in pending]
        if event.tool_call_id not in ids:
            return []  # decided (or superseded) before we got to it: no buttons that only say "too late"
        number = ids.index(event.tool_call_id) + 1 if len(ids) > 1 else None
        last = await self.state.last_inbound(conversation.e164)
        in_window = last is not None and time.time() - last <= self.options.window
        message = await self.buttons.message(event, conversation, texts, number=number, in_window=in_window)
        return [message if message is not None else _Undeliverable("outside_window_no_template")]

    async def _running(self, conversation: Conversation, event: ToolStartedEvent) -> list[Part] | float:
        later = await self.services.runtime.store.read_events(conversation.thread_id, event.seq, limit=500)
        ended = (ToolCompletedEvent, ToolFailedEvent, ToolDeniedEvent)
        if any(isinstance(e, ended) and e.tool_call_id == event.tool_call_id for e in later):
            return []
        try:
            started = datetime.fromisoformat(event.at).timestamp()
        except ValueError:
            started = time.time()
        due = started + self.options.slow_after - time.time()
        if due > 0:
            return due
        last = await self.state.last_inbound(conversation.e164)
        if last is None or time.time() - last > self.options.window:
            return []
        return [OutboundMessage(to=conversation.to, body=f"⏳ {event.running}…")]

    async def _settled(
        self, conversation: Conversation, event: ApprovalSettledEvent, texts: WhatsAppTexts
    ) -> list[Part]:
        if event.via in _SILENT_VIA:
            return []
        if event.status == "expired":
            record = await self.state.store.channel_get(self.state.key("appr", event.tool_call_id))
            title = record.get("title") if isinstance(record, dict) else None
            body = texts.expired_named.format(title=title) if title else texts.expired
        elif event.status == "approved":
            body = texts.approved_elsewhere.format(via=texts.via(event.via))
        else:
            body = texts.rejected_elsewhere.format(via=texts.via(event.via))
        return [OutboundMessage(to=conversation.to, body=body)]

    async def _ui(self, conversation: Conversation, event: UiEvent) -> list[Part]:
        delivered = await self.services.deliver_ui(event, self.options.capabilities)
        text = delivered.text or ""
        media = delivered.media
        if media:
            caption = _clip(to_whatsapp(text), _MAX_CAPTION) if text else None
            return [
                OutboundMessage(to=conversation.to, media_url=item.url, body=caption if index == 0 else None)
                for index, item in enumerate(media)
            ]
        return [OutboundMessage(to=conversation.to, body=body) for body in split_message(to_whatsapp(text))]

    # -- direct replies ---------------------------------------------------------------------------------

    async def reply(self, to: str, text: str) -> None:
        """Send a fixed sentence (a refusal, "already decided"...) outside any thread's log.

        A failure is logged, not raised: the webhook that caused it already answered.
        """
        for body in split_message(text):
            try:
                await self.sender.send(OutboundMessage(to=to, body=body))
            except WhatsAppSendError as exc:
                logger.error("reply to %s not sent: %s", to, exc)
                return


def _units(events: list[RunEvent], resume: list[int] | None = None) -> list[list[RunEvent]]:
    """Group events in delivery units: one each, but a call's ``ui`` events go after its outcome.

    ``ui`` events right before their call's ``tool-completed`` are sent after it (``✓ Refunded
    order 1042``, then the receipt). A unit is delivered as a whole; the cursor moves past its
    highest ``seq``. A unit delivered in part is resumed as it was (``resume`` lists its events'
    ``seq`` in delivery order), since the events read after a restart may group differently.
    """
    units: list[list[RunEvent]] = []
    if resume:
        by_seq = {e.seq: e for e in events}
        if all(seq in by_seq for seq in resume):
            units.append([by_seq[seq] for seq in resume])
            events = [e for e in events if e.seq not in set(resume)]
    pending: list[RunEvent] = []
    for event in events:
        if (
            isinstance(event, UiEvent)
            and event.tool_call_id
            and (not pending or getattr(pending[0], "tool_call_id", None) == event.tool_call_id)
        ):
            pending.append(event)
            continue
        if isinstance(event, ToolCompletedEvent) and pending and pending[0].tool_call_id == event.tool_call_id:  # type: ignore[union-attr]
            units.append([event, *pending])
            pending = []
            continue
        units.extend([e] for e in pending)
        pending = []
        if isinstance(event, UiEvent) and event.tool_call_id:
            pending.append(event)
        else:
            units.append([event])
    units.extend([e] for e in pending)
    return units


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _result_line(result: dict[str, Any] | None) -> str:
    """A result view as a few words after the ``done`` line (metrics and notes only)."""
    if not result:
        return ""
    if result.get("kind") == "metrics":
        items = [
            f"{i.get('label')}: {i.get('value')}" for i in result.get("items", []) if i.get("value") not in (None, "")
        ]
        return f" — {'; '.join(items)}" if items else ""
    if result.get("kind") == "note" and result.get("text"):
        return f" — {result['text']}"
    return ""
