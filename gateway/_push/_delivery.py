"""``PushDelivery``: a thread's events pushed to a text channel, from whichever process wrote them.

``PushDelivery`` is a runtime observer: every process that writes events (the one running a turn,
the one that took a web decision and resumed the run, the one expiring an approval) is told, and
schedules a drain of that thread. A drain holds the thread's delivery lease in the store (taken
with a claim, renewed and given back by compare-and-set, so a process never frees a lease
another took since), reads the event log after the thread's cursor, asks the channel's
``PushPort`` for each event's parts and moves the cursor after each part sent, so a crash or a
failed send resumes where it stopped: nothing is lost and nothing is sent twice (but for a
request the provider accepted whose answer never came back, when its API has no idempotency key).

A channel writes a ``PushPort``: the shared wording of events is here (``on_<event>`` hooks of
``EventHooks``); the channel says how a text, a component and an approval become its parts, and
how a part is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from tools import AgoraError, UiCapabilities

from .._approvals import REQUESTER
from .._errors import GatewayError, StoreUnavailableError
from .._guards import INPUT_REFUSED, OUTPUT_REFUSED
from .._hooks import EventHooks
from .._logs import actor_hash, bind_log
from .._runtime import RuntimeObserver
from .._tracing import parent_of, send_span, trace_http_status
from ..events import (
    ApprovalRequestedEvent,
    ApprovalSettledEvent,
    QuotaWarningEvent,
    RunErrorEvent,
    RunEvent,
    TextEndEvent,
    ToolCompletedEvent,
    ToolDeniedEvent,
    ToolFailedEvent,
    ToolStartedEvent,
    UiEvent,
)
from ._approvals import ApprovalTokens, ChatApprovals
from ._staff import Forwarded, StaffMember, staff_outcome_parts, staff_request_parts
from ._state import PushCursor, PushState, PushTarget
from ._texts import CHAT_TEXTS, ChatTexts, texts_for

if TYPE_CHECKING:
    from .._channel import ChannelServices
    from .._services import DeliveredUi

__all__ = [
    "PushDelivery",
    "PushOptions",
    "PushPart",
    "PushPort",
    "PushSendError",
    "RetryPolicy",
    "Undeliverable",
]

logger = logging.getLogger("gateway.push")

T = TypeVar("T")
_NOT_OURS_FOR = 10.0
_PAGE = 100


class _LeaseLostError(AgoraError):
    """The thread's delivery lease lapsed and another process holds it now: this drain stops."""


class PushSendError(GatewayError):
    """A provider refused a part, or could not be reached.

    Attributes:
        retryable: Whether the same request may succeed later (429, 5xx, network).
        retry_after: Seconds the provider asked us to wait (Telegram's ``retry_after``), if any.
        http_status: The provider's HTTP status, ``None`` when it was not reached.
        provider_code: The provider's own error code, when it gave one.
    """

    status, code = 502, "push_send_failed"

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        http_status: int | None = None,
        provider_code: str | int | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.http_status = http_status
        self.provider_code = provider_code

    def details(self) -> dict[str, Any]:
        """What a failure record keeps of this error besides its message."""
        return {"provider_code": self.provider_code}


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How often and how patiently one request is retried when the provider says it may succeed later.

    The wait before retry ``n`` (1-based) is ``base_delay * factor ** (n - 1)``, capped at
    ``max_delay``, with up to 25 % random jitter so that many senders do not retry in step. A
    provider's ``retry_after`` longer than ``max_delay`` is not waited for here: the error goes
    up, and the delivery tries the part again after it.
    """

    attempts: int = 4
    """Tries in all, the first included."""
    base_delay: float = 0.5
    factor: float = 2.0
    max_delay: float = 8.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base_delay < 0 or self.factor < 1 or self.max_delay < 0:
            raise ValueError("RetryPolicy needs attempts >= 1, factor >= 1 and non-negative delays")

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        base = min(self.max_delay, self.base_delay * self.factor ** (retry - 1))
        return base * (1 - random.random() * 0.25)

    async def run(self, call: Callable[[], Awaitable[T]], what: str) -> T:
        """Await ``call()`` until it succeeds, fails for good, or the attempts are used up."""
        for attempt in range(1, self.attempts + 1):
            try:
                return await call()
            except PushSendError as exc:
                if not exc.retryable or attempt == self.attempts:
                    raise
                if exc.retry_after is not None and exc.retry_after > self.max_delay:
                    raise
                wait = max(self.delay(attempt), exc.retry_after or 0.0)
                logger.info("%s failed (%s); retry %d in %.2f s", what, exc, attempt, wait)
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


class PushPart(Protocol):
    """One message a channel sends; its JSON form is recorded with what was sent or given up on."""

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Undeliverable:
    """A part that cannot be sent (outside a window, no template): recorded, never retried."""

    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"undeliverable": self.reason}


P = TypeVar("P", bound=PushPart)
Parts = list[Any] | float
"""What a hook answers: the event's parts (``P`` or ``Undeliverable``), or seconds to wait before asking again."""


@dataclass(frozen=True, kw_only=True)
class PushOptions:
    """Timing of delivery; tests shrink these."""

    slow_after: float = 2.0
    """Seconds a tool call runs before its ``running`` line is sent."""
    lock_ttl: float = 120.0
    """Seconds a process's delivery lease on a thread lasts without renewal."""
    lock_retry: float = 0.25
    """Seconds before trying again when another process holds a thread's lease."""
    redeliver_after: float = 30.0
    """Seconds before a part whose sends all failed is tried again."""
    max_rounds: int = 5
    """Failed rounds (each a full ``RetryPolicy``) before a part is given up on and recorded."""
    capabilities: UiCapabilities | None = None
    """What the conversations show (the port's ``capabilities`` when ``None``)."""


_target: contextvars.ContextVar[PushTarget] = contextvars.ContextVar("agora_push_target")


class PushPort(EventHooks[Parts], Generic[P]):
    """A push channel's half of delivery: its parts, and how to send one.

    The hooks word each event the shared way (``on_text_end`` -> the text; ``on_tool_started``
    -> ``⏳ running…`` once the call is slow; ``on_tool_completed`` -> ``✓ done``;
    ``on_approval_requested`` -> ``approval_parts`` with single-use tokens;
    ``on_approval_settled`` -> a sentence when decided elsewhere or expired; ``on_ui`` ->
    ``media_parts`` or the text; ``on_run_error`` -> an apology). ``self.target`` is the
    conversation being delivered. A channel implements the four abstract methods, and may
    override any hook (Telegram edits its approval card on ``on_approval_settled``).
    """

    via: str = "push"
    """The channel's name in decisions (``approval-settled.via``): those are not repeated to it."""
    capabilities: UiCapabilities = UiCapabilities(formats=["text"])
    shown: frozenset[str] = frozenset(
        {
            "text-end",
            "tool-started",
            "tool-completed",
            "approval-requested",
            "approval-settled",
            "ui",
            "run-error",
            "quota-warning",
        }
    )
    """Event types this port delivers (others are skipped without a hook call)."""
    silent_via: frozenset[str] = frozenset({"superseded", "cancelled"})
    """Decisions the person saw happen (their next message, their Stop): not worded again."""

    delivery: PushDelivery[P]

    # -- what a channel implements ------------------------------------------------------------------

    def text_parts(self, target: PushTarget, markdown: str) -> list[P]:
        """The agent's Markdown as this channel's messages (converted, split at its length)."""
        raise NotImplementedError

    def line_parts(self, target: PushTarget, text: str) -> list[P]:
        """One of our own sentences (``ChatTexts``, narration) as messages; ``text_parts`` by default."""
        return self.text_parts(target, text)

    async def media_parts(self, target: PushTarget, delivered: DeliveredUi) -> list[P]:
        """A component rendered as media (``delivered.media``, caption from ``delivered.text``)."""
        raise NotImplementedError

    async def approval_parts(
        self, target: PushTarget, event: ApprovalRequestedEvent, tokens: ApprovalTokens, number: int | None
    ) -> list[Any]:
        """The approval request with its two buttons (``tokens``); ``number`` when several wait."""
        raise NotImplementedError

    async def send(self, target: PushTarget, part: P) -> str | None:
        """Send one part; the provider's message id.

        Raises:
            PushSendError: The provider refused it (``retryable`` when it may work later).
        """
        raise NotImplementedError

    async def closed(self, target: PushTarget, event: RunEvent) -> str | None:
        """Why free-form messages cannot go to ``target`` now (WhatsApp's 24 h window), or ``None``."""
        return None

    async def staff_targets(self, role: str) -> list[StaffMember]:
        """The staff chats of this channel whose people hold ``role`` (``gateway._push._staff``); none by default.

        An approval that role decides is sent there, with buttons, instead of to the requester.
        """
        return []

    async def sent(self, target: PushTarget, part: P, message_id: str | None, where: dict[str, Any]) -> None:
        """Called after each part is sent (``where``: its ``seq``, ``part`` and ``event``)."""

    # -- context --------------------------------------------------------------------------------------

    @property
    def target(self) -> PushTarget:
        """The conversation whose events are being turned into parts."""
        return _target.get()

    @property
    def services(self) -> ChannelServices:
        return self.delivery.services

    def texts(self, target: PushTarget | None = None) -> ChatTexts:
        """The sentences in the target's language."""
        return self.delivery.texts_for((target or self.target).language)

    # -- the shared wording -------------------------------------------------------------------------

    async def default(self, event: RunEvent) -> Parts:
        return []

    async def _free(self, event: RunEvent) -> list[Any] | None:
        """``None`` when free-form messages may go; else the parts that say why not."""
        reason = await self.closed(self.target, event)
        return [Undeliverable(reason)] if reason else None

    async def on_text_end(self, event: TextEndEvent) -> Parts:
        return await self._free(event) or self.text_parts(self.target, event.text)

    async def on_tool_started(self, event: ToolStartedEvent) -> Parts:
        target = self.target
        later = await self.services.runtime.read_events(target.thread_id, event.seq, limit=500)
        ended = (ToolCompletedEvent, ToolFailedEvent, ToolDeniedEvent)
        if any(isinstance(e, ended) and e.tool_call_id == event.tool_call_id for e in later):
            return []
        try:
            started = datetime.fromisoformat(event.at).timestamp()
        except ValueError:
            started = time.time()
        due = started + self.delivery.options.slow_after - time.time()
        if due > 0:
            return due
        if await self.closed(target, event):
            return []
        return self.line_parts(target, f"⏳ {event.running}…")

    async def on_tool_completed(self, event: ToolCompletedEvent) -> Parts:
        return await self._free(event) or self.line_parts(self.target, f"✓ {event.done}{result_line(event.result)}")

    async def on_approval_requested(self, event: ApprovalRequestedEvent) -> Parts:
        target = self.target
        pending = await self.services.runtime.pending_approvals(target.thread_id)
        ids = [a.tool_call_id for a in pending]
        if event.tool_call_id not in ids:
            return []  # decided (or superseded) before we got to it: no buttons that only say "too late"
        if event.approver != REQUESTER:
            return await staff_request_parts(self, target, event)  # to the role's people, not the requester
        number = ids.index(event.tool_call_id) + 1 if len(ids) > 1 else None
        # A third button, "always", where the decision may be remembered (the requester decides).
        always = self.services.runtime.approval_policy.allow_remember
        tokens = await self.delivery.approvals.tokens(event, target, always=always)
        return await self.approval_parts(target, event, tokens, number)

    async def staff_outcome(self, event: ApprovalSettledEvent) -> list[Any] | None:
        """The requester's line when staff decided their approval; ``None`` when it was not a role's."""
        return await staff_outcome_parts(self, event)

    async def on_approval_settled(self, event: ApprovalSettledEvent) -> Parts:
        staff = await self.staff_outcome(event)
        if staff is not None:
            return staff  # staff decided: the requester is told the outcome, whichever channel it came by
        if event.via == self.via or event.via in self.silent_via:
            return []
        free = await self._free(event)
        if free:
            return free
        texts = self.texts()
        if event.status == "expired":
            title = await self.delivery.approvals.title(event.tool_call_id)
            body = texts.expired_named.format(title=title) if title else texts.expired
        elif event.status == "approved":
            body = texts.approved_elsewhere.format(via=texts.via(event.via))
        else:
            body = texts.rejected_elsewhere.format(via=texts.via(event.via))
        return self.line_parts(self.target, body)

    async def on_ui(self, event: UiEvent) -> Parts:
        free = await self._free(event)
        if free:
            return free
        capabilities = self.delivery.options.capabilities or self.capabilities
        delivered = await self.services.deliver_ui(event, capabilities)
        if delivered.media:
            return list(await self.media_parts(self.target, delivered))
        return self.text_parts(self.target, delivered.text or "")

    async def on_run_error(self, event: RunErrorEvent) -> Parts:
        return await self._free(event) or self.line_parts(self.target, self._error_text(event))

    def _error_text(self, event: RunErrorEvent) -> str:
        """A failed run in the person's words: a refusal, a used-up budget, else an apology."""
        texts = self.texts()
        match event.code:
            case "input_refused":
                return texts.input_refused if event.message == INPUT_REFUSED else event.message
            case "output_refused":
                return texts.output_refused if event.message == OUTPUT_REFUSED else event.message
            case "quota_exceeded":
                return texts.quota_exceeded(event.period)
            case _:
                return texts.failed

    async def on_quota_warning(self, event: QuotaWarningEvent) -> Parts:
        text = self.texts().quota_near(event.period, event.used, event.limit)
        return await self._free(event) or self.line_parts(self.target, text)


class PushDelivery(RuntimeObserver, Generic[P]):
    """Sends each bound thread's events to its target through a ``PushPort``, once and in order.

    Args:
        services: The app's channel services.
        port: The channel's port.
        prefix: The channel's key prefix in the store's channel state (``wa``, ``tg``...).
        options: Timing.
        texts: Sentences by language (``CHAT_TEXTS`` by default).
    """

    def __init__(
        self,
        services: ChannelServices,
        port: PushPort[P],
        *,
        prefix: str,
        options: PushOptions | None = None,
        texts: dict[str, ChatTexts] | None = None,
        state: PushState | None = None,
    ) -> None:
        self.services = services
        self.port = port
        port.delivery = self
        self.options = options or PushOptions()
        self.state = state or services.state(prefix, PushState)
        self.approvals = ChatApprovals(self.state)
        self.texts = dict(texts or CHAT_TEXTS)
        self.owner = f"{services.runtime.instance_id}:{prefix}:{uuid.uuid4().hex[:6]}"
        self._drainers: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._not_ours: dict[str, float] = {}
        self._contended: dict[str, int] = {}
        self._backoff: dict[str, float] = {}
        """Threads whose last send failed: ``time.monotonic()`` until which new writes do not drain them."""
        self._closed = False
        self._observing = False

    def texts_for(self, language: str | None) -> ChatTexts:
        """The sentences in ``language`` (an exact tag, else its primary language, else English)."""
        return texts_for(language, self.texts)

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Listen to the runtime's writes (every process that shares the store delivers)."""
        if not self._observing:
            self.services.observe(self)
            self._observing = True
        self._closed = False

    async def aclose(self) -> None:
        """Stop: cancel timers, drains and owned tasks (their cursors keep what was sent)."""
        self._closed = True
        if self._observing:
            self.services.unobserve(self)
            self._observing = False
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        tasks = [*self._drainers.values(), *self._tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._drainers.clear()
        self._tasks.clear()

    def health(self) -> dict[str, Any]:
        """What this process delivers now, for a health check (counts only: no address, no text).

        ``running``: whether it listens to the runtime's writes; ``draining``: threads being
        delivered now; ``retrying``: threads whose last send failed, waiting for their next round;
        ``scheduled``: threads with a later drain set (a retry, a lease held elsewhere).
        """
        now = time.monotonic()
        return {
            "running": self._observing and not self._closed,
            "draining": sum(1 for task in self._drainers.values() if not task.done()),
            "retrying": sum(1 for until in self._backoff.values() if until > now),
            "scheduled": sum(1 for handle in self._timers.values() if not handle.cancelled()),
        }

    def spawn(self, work: Coroutine[Any, Any, Any], name: str) -> None:
        """Run ``work`` in a task this delivery owns (cancelled and awaited by ``aclose``)."""
        if self._closed:
            work.close()
            return
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._forget_task)

    def _forget_task(self, task: asyncio.Task[Any]) -> None:
        """Drop a finished owned task, logging its failure (nobody else awaits it)."""
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            logger.error("task %s failed", task.get_name(), exc_info=exc)

    async def idle(self) -> None:
        """Wait until no drain or owned task runs (timers set for later may still be pending)."""
        while self._drainers or self._tasks:
            await asyncio.gather(*self._drainers.values(), *self._tasks, return_exceptions=True)

    # -- binding ------------------------------------------------------------------------------------

    async def bind(self, target: PushTarget) -> None:
        """Deliver ``target.thread_id``'s events to ``target`` from now on (its cursor is kept if bound)."""
        current = await self.state.target(target.thread_id)
        if current != target:
            await self.state.bind(target, start_seq=await self.services.runtime.last_seq(target.thread_id))
        self._not_ours.pop(target.thread_id, None)

    async def target(self, thread_id: str) -> PushTarget | None:
        """Where a thread's events go, or ``None`` when it is not this channel's."""
        return await self.state.target(thread_id)

    # -- scheduling ---------------------------------------------------------------------------------

    def events_written(self, thread_id: str, events: list[RunEvent]) -> None:
        """Schedule a drain of the thread when it wrote something this channel shows."""
        if self._closed or not any(event.type in self.port.shown for event in events):
            return
        now = time.monotonic()
        if self._not_ours.get(thread_id, 0.0) > now:
            return
        if self._backoff.get(thread_id, 0.0) > now:
            return  # a send failed: the timer set for its next round drains the thread, not every write
        self.notify(thread_id)

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
        task = asyncio.create_task(self._run(thread_id), name=f"agora-push-{self.state.prefix}-{thread_id}")
        self._drainers[thread_id] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._drainers.get(thread_id) is done:
                del self._drainers[thread_id]

        task.add_done_callback(forget)

    def later(self, thread_id: str, delay: float) -> None:
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
        # A task of its own, started from whichever run or request wrote: its lines are the thread's.
        bind_log(thread_id=thread_id, run_id=None)
        while True:
            self._dirty.discard(thread_id)
            try:
                await self.drain(thread_id)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("delivering thread %s failed; trying again later", thread_id)
                self._backoff[thread_id] = time.monotonic() + self.options.redeliver_after
                self.later(thread_id, self.options.redeliver_after)
            if thread_id not in self._dirty:
                return

    # -- draining -----------------------------------------------------------------------------------

    async def drain(self, thread_id: str) -> None:
        """Deliver the thread's events after its cursor, under the thread's delivery lease."""
        target = await self.state.target(thread_id)
        if target is None:
            now = time.monotonic()
            if len(self._not_ours) > 10_000:
                self._not_ours = {t: until for t, until in self._not_ours.items() if until > now}
            self._not_ours[thread_id] = now + _NOT_OURS_FOR
            return
        if not await self.state.lock(thread_id, self.owner, self.options.lock_ttl):
            # Another process delivers this thread: look again soon, less often while it lasts
            # (a process that died holding the lease frees it after lock_ttl).
            tries = self._contended[thread_id] = self._contended.get(thread_id, 0) + 1
            self.later(thread_id, min(self.options.lock_retry * 2 ** min(tries - 1, 10), 5.0))
            return
        self._contended.pop(thread_id, None)
        token = _target.set(target)
        try:
            await self._drain_locked(target)
        except _LeaseLostError:
            logger.warning("thread %s: the delivery lease lapsed and another process took it; stopping", thread_id)
        finally:
            _target.reset(token)
            with contextlib.suppress(Exception):
                await self.state.unlock(thread_id, self.owner)

    async def _drain_locked(self, target: PushTarget) -> None:
        thread_id = target.thread_id
        cursor = await self.state.cursor(thread_id)
        if cursor is None:
            cursor = PushCursor(seq=await self.services.runtime.last_seq(thread_id))
            logger.warning("thread %s had no delivery cursor; delivering from seq %d", thread_id, cursor.seq)
            await self.state.save_cursor(thread_id, cursor)
        while True:
            events = await self.services.runtime.read_events(thread_id, cursor.seq, limit=_PAGE)
            for unit in units(events, resume=cursor.unit if cursor.part else None):
                wait = await self._deliver(target, unit, cursor)
                if wait is not None:
                    await self.state.save_cursor(thread_id, cursor)
                    self.later(thread_id, wait)
                    return
            if events:
                await self.state.save_cursor(thread_id, cursor)
            if len(events) < _PAGE:
                return

    async def _deliver(self, target: PushTarget, unit: list[RunEvent], cursor: PushCursor) -> float | None:
        """Send what ``unit`` needs from ``cursor.part`` on; seconds to wait before retrying, or None."""
        parts: list[tuple[RunEvent, Any]] = []
        for event in unit:
            if event.type not in self.port.shown:
                continue
            try:
                made = await self.port.dispatch(event)
            except (StoreUnavailableError, asyncio.CancelledError):
                raise  # an outage: the drain is tried again after it, from the same cursor
            except Exception as exc:
                # A fault in the port (a bug, an error it does not map): a round like a failed
                # send, then recorded and passed, so one bad event never stops the thread.
                logger.exception("thread %s seq %d: the %s hook failed", target.thread_id, event.seq, event.type)
                wait = await self._failed_round(target, cursor, {"seq": event.seq, "part": 0, "event": event.type}, exc)
                if wait is not None:
                    return wait
                continue
            if not isinstance(made, list):
                return float(made)
            parts.extend((event, part) for part in made)
        thread_id = target.thread_id
        for index in range(cursor.part, len(parts)):
            event, part = parts[index]
            # Renewed before each send, never after: a drain whose lease lapsed (a long send, a
            # paused process) and that another process took must not send what that one sends.
            if not await self.state.renew(thread_id, self.owner, self.options.lock_ttl):
                raise _LeaseLostError(thread_id)
            failure = await self._send(target, event, index, part, cursor)
            if failure is not None:
                return failure
            cursor.part, cursor.failures, cursor.unit = index + 1, 0, [e.seq for e in unit]
            await self.state.save_cursor(thread_id, cursor)
        cursor.seq, cursor.part, cursor.failures, cursor.unit = max(e.seq for e in unit), 0, 0, None
        if parts:
            await self.state.save_cursor(thread_id, cursor)
        # else: saved with the page, or with the next part sent
        return None

    async def _send(
        self, target: PushTarget, event: RunEvent, index: int, part: Any, cursor: PushCursor
    ) -> float | None:
        """Send one part; a delay when it must be tried again later, else ``None`` (sent or recorded)."""
        thread_id = target.thread_id
        where = {"seq": event.seq, "part": index, "event": event.type}
        if isinstance(part, Undeliverable):
            logger.warning("thread %s seq %d: not sent: %s", thread_id, event.seq, part.reason)
            await self.state.record_failure(thread_id, {**where, "reason": part.reason})
            return None
        # A staff member's approval card goes to their chat, through this thread's cursor.
        destination, message = (part.target, part.part) if isinstance(part, Forwarded) else (target, part)
        try:
            message_id = await self._send_part(event, destination, message)
        except StoreUnavailableError:
            raise
        except PushSendError as exc:
            if exc.retryable and cursor.failures + 1 < self.options.max_rounds:
                cursor.failures += 1
                await self.state.save_cursor(thread_id, cursor)
                wait = max(self.options.redeliver_after, exc.retry_after or 0.0)
                self._backoff[thread_id] = time.monotonic() + wait
                logger.warning(
                    "thread %s seq %d part %d: %s; round %d of %d, next in %.1f s",
                    thread_id,
                    event.seq,
                    index,
                    exc,
                    cursor.failures,
                    self.options.max_rounds,
                    wait,
                )
                return wait
            self._backoff.pop(thread_id, None)
            reason = "gave_up" if exc.retryable else "refused"
            logger.error("thread %s seq %d part %d %s: %s", thread_id, event.seq, index, reason, exc)
            await self.state.record_failure(
                thread_id,
                {
                    **where,
                    "reason": reason,
                    "error": str(exc),
                    **exc.details(),
                    "message": part.to_json(),
                },
            )
            return None
        except Exception as exc:
            logger.exception("thread %s seq %d part %d: the port's send failed", thread_id, event.seq, index)
            return await self._failed_round(target, cursor, {**where, "message": part.to_json()}, exc)
        self._backoff.pop(thread_id, None)
        if message_id:
            await self.state.record_sent(
                message_id, {"thread_id": thread_id, **where, "message": part.to_json(), "resends": 0}
            )
        await self.port.sent(destination, message, message_id, where)
        return None

    async def _send_part(self, event: RunEvent, destination: PushTarget, message: Any) -> str | None:
        """``port.send``, in a ``send <channel>`` span of the event's run's trace."""
        parent = await parent_of(event.run_id, self.services.runtime.store.get_run)
        with send_span(self.port.via, parent) as span:
            try:
                return await self.port.send(destination, message)
            except PushSendError as exc:
                trace_http_status(exc.http_status, span)
                raise

    async def _failed_round(
        self, target: PushTarget, cursor: PushCursor, where: dict[str, Any], exc: Exception
    ) -> float | None:
        """Count a round the port failed unexpectedly: the delay to the next, or ``None`` once given up (recorded)."""
        thread_id = target.thread_id
        if cursor.failures + 1 < self.options.max_rounds:
            cursor.failures += 1
            await self.state.save_cursor(thread_id, cursor)
            self._backoff[thread_id] = time.monotonic() + self.options.redeliver_after
            return self.options.redeliver_after
        cursor.failures = 0
        self._backoff.pop(thread_id, None)
        await self.state.record_failure(
            thread_id, {**where, "reason": "failed", "error": f"{type(exc).__name__}: {exc}"}
        )
        return None

    # -- direct replies -----------------------------------------------------------------------------

    async def reply(self, target: PushTarget, text: str) -> None:
        """Send one of our sentences (a refusal, "already decided"...) outside any thread's log.

        A failure is logged, not raised: the webhook that caused it already answered.
        """
        for part in self.port.line_parts(target, text):
            try:
                await self.port.send(target, part)
            except PushSendError as exc:
                logger.error("reply to %s not sent: %s", actor_hash(target.address), exc)
                return


def units(events: Sequence[RunEvent], resume: list[int] | None = None) -> list[list[RunEvent]]:
    """Group events in delivery units: one each, but a call's ``ui`` events go after its outcome.

    ``ui`` events right before their call's ``tool-completed`` are sent after it (``✓ Refunded
    order 1042``, then the receipt). A unit is delivered as a whole; the cursor moves past its
    highest ``seq``. A unit delivered in part is resumed as it was (``resume`` lists its events'
    ``seq`` in delivery order), since the events read after a restart may group differently.
    """
    units: list[list[RunEvent]] = []
    rest = list(events)
    if resume:
        by_seq = {e.seq: e for e in rest}
        if all(seq in by_seq for seq in resume):
            units.append([by_seq[seq] for seq in resume])
            resumed = set(resume)
            rest = [e for e in rest if e.seq not in resumed]
    pending: list[UiEvent] = []
    for event in rest:
        if (
            isinstance(event, UiEvent)
            and event.tool_call_id
            and (not pending or pending[0].tool_call_id == event.tool_call_id)
        ):
            pending.append(event)
            continue
        if isinstance(event, ToolCompletedEvent) and pending and pending[0].tool_call_id == event.tool_call_id:
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


def result_line(result: dict[str, Any] | None) -> str:
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


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
