"""``ChatInbound``: one person's message on a text channel, after the channel has read and checked it.

A channel verifies its webhook, parses the provider's payload, resolves the sender to an actor
and names the thread; what follows is the same on every text channel and lives here: bind the
thread to the sender, redeem a tapped button, read a typed ``yes`` / ``no 2`` or ``cancel``,
refuse what is too long, send the turn (or say "too fast"), one message of a sender at a time,
in arrival order.

A message that arrives while the thread has an active run waits in the thread's queue
(``Runtime.send``) and is answered after it, so a burst of messages is answered in order and
none is dropped. When the active run waits for an approval the person is told so in their
language, and the approval's buttons (with their ``yes`` / ``no`` instruction) are sent again:
the message does not settle it. A typed ``cancel`` stops the active run (a waiting one ends,
its approval rejected); the queued messages then run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tools import Actor

from .._approvals import ApprovalFlow
from .._errors import (
    AttachmentTooLargeError,
    AttachmentTypeError,
    QueueFullError,
    QuotaExceededError,
    RateLimitedError,
    RunNotActiveError,
    ThreadBusyError,
    ThreadParkedError,
    UnknownAgentError,
)
from .._logs import actor_hash
from ..events import MAX_ATTACHMENTS, Attachment, Turn
from ._approvals import Redeemed
from ._delivery import PushSendError, Undeliverable
from ._media_fetch import MediaFetchError, ProviderMedia
from ._state import PushTarget
from ._texts import ChatTexts, parse_always, parse_cancel, parse_decision

if TYPE_CHECKING:
    from .._channel import ChannelServices
    from ._delivery import PushDelivery

__all__ = ["ChatInbound", "InboundMessage", "InboundOptions"]

logger = logging.getLogger("gateway.push.inbound")


@dataclass(frozen=True, kw_only=True)
class InboundOptions:
    """Limits of inbound messages."""

    max_chars: int = 4000
    """Longer messages are refused with ``too_long``."""
    busy_wait: float = 20.0
    """Unused since messages to a busy thread queue (kept so existing configurations load)."""
    refusal_every: float = 3600.0
    """Seconds between two "you are not set up" replies to one unknown sender."""


@dataclass(frozen=True, kw_only=True)
class InboundMessage:
    """A checked message: who wrote, where the thread's events go, and what they said or tapped."""

    target: PushTarget
    actor: Actor
    text: str = ""
    button: str | None = None
    """A tapped button's payload (``agora:<token>``), when this is a tap."""
    has_media: bool = False
    """The message carried media the channel does not read (answered ``media_unsupported``)."""
    media: tuple[ProviderMedia, ...] = ()
    """Media the channel can fetch (a photo, a document): stored as the turn's attachments."""
    page_context: Mapping[str, Any] = field(default_factory=dict)
    agent: str | None = None
    """The agent the turn talks to (the channel's mapping: a number's, a bot's); the default when ``None``."""


class ChatInbound:
    """Handles checked messages of one text channel."""

    def __init__(
        self,
        services: ChannelServices,
        delivery: PushDelivery[Any],
        *,
        via: str,
        options: InboundOptions | None = None,
    ) -> None:
        self.services = services
        self.delivery = delivery
        self.via = via
        self.options = options or InboundOptions()
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._arrival: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def in_order(self, key: str) -> AsyncIterator[None]:
        """Hold ``key`` (a sender) so its messages are handled one at a time, in arrival order.

        A channel enters it first thing in the task of each message, before anything it awaits
        (resolving the sender, recording their window), so a quick second message never
        overtakes the first. Tasks start in the order the webhooks arrived, and so take it.
        """
        lock, users = self._arrival.get(key) or (asyncio.Lock(), 0)
        self._arrival[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._arrival[key]
            if users <= 1:
                del self._arrival[key]
            else:
                self._arrival[key] = (lock, users - 1)

    def texts(self, target: PushTarget) -> ChatTexts:
        return self.delivery.texts_for(target.language)

    async def handle(self, message: InboundMessage) -> Redeemed | None:
        """Handle one message; never raises but for cancellation.

        Returns what a button tap did (a channel that answers taps itself, Telegram's
        ``answerCallbackQuery``, words it), ``None`` for other messages.
        """
        # One message of a person at a time, in arrival order: the lock is their thread's (in a
        # Telegram group every member shares the chat's address but has a thread of their own).
        address = message.target.address
        key = message.target.thread_id or address
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                return await self._handle(message)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("inbound message from %s failed", actor_hash(address))
            await self.delivery.reply(message.target, self.texts(message.target).failed)
            return None
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    async def refuse(self, target: PushTarget) -> None:
        """Tell an unknown sender they are not set up (at most once per ``refusal_every``)."""
        key = self.delivery.state.key("refused", target.address)
        if await self.delivery.state.claim(key, ttl=self.options.refusal_every):
            logger.info("refused unknown %s sender %s", self.via, actor_hash(target.address))
            await self.delivery.reply(target, self.texts(target).unknown_sender)

    async def _handle(self, message: InboundMessage) -> Redeemed | None:
        target, actor = message.target, message.actor
        texts = self.texts(target)
        runtime = self.services.runtime
        await self.delivery.bind(target)
        if message.button is not None:
            redeemed = await self.delivery.approvals.redeem(
                runtime, message.button, address=target.address, actor=actor, texts=texts, via=self.via
            )
            return redeemed
        body = message.text.strip()
        if message.has_media and not message.media:
            await self.delivery.reply(target, texts.media_unsupported)
        attachments = await self._attachments(message, texts)
        if not body and not attachments:
            return None
        if len(body) > self.options.max_chars:
            await self.delivery.reply(target, texts.too_long.format(limit=self.options.max_chars))
            return None
        always = parse_always(body) if not attachments else None  # "yes always" / "sim sempre"
        decision = always or (parse_decision(body) if not attachments else None)
        if decision is not None:
            try:
                reply = await self.delivery.approvals.decide_text(
                    runtime, target.thread_id, decision, actor=actor, texts=texts, via=self.via, remember=bool(always)
                )
            except LookupError:
                pass  # nothing waits: "yes" is an ordinary answer to the agent
            else:
                if reply:
                    await self.delivery.reply(target, reply)
                return None
        if parse_cancel(body) and await self._cancel(message, texts):
            return None
        await self._turn(message, body, texts, attachments)
        return None

    async def _cancel(self, message: InboundMessage, texts: ChatTexts) -> bool:
        """Stop the thread's active run for a typed ``cancel``; ``False`` when none is active."""
        runtime = self.services.runtime
        active = [r for r in await runtime.thread_runs(message.target.thread_id) if r.status in _ACTIVE]
        if not active:
            return False  # nothing runs: "cancel" is an ordinary message to the agent
        try:
            await runtime.cancel(active[-1].run_id, message.actor)
        except RunNotActiveError:
            pass  # it ended meanwhile: stopped all the same
        await self.delivery.reply(message.target, texts.cancelled)
        return True

    async def _attachments(self, message: InboundMessage, texts: ChatTexts) -> tuple[Attachment, ...]:
        """Fetch and store the message's media; each refused one is told (its reason) and logged once."""
        stored: list[Attachment] = []
        for media in message.media[:MAX_ATTACHMENTS]:
            try:
                stored.append(await media.fetch(message.actor, message.target.thread_id))
            except (AttachmentTooLargeError, AttachmentTypeError, MediaFetchError) as exc:
                logger.info(
                    "refused %s media (%s) from %s: %s", self.via, exc.code, actor_hash(message.target.address), exc
                )
                if isinstance(exc, AttachmentTooLargeError):
                    limit = self.services.attachments.max_bytes
                    reply = texts.media_too_large.format(limit=f"{limit / 1_000_000:g} MB")
                else:
                    reply = (
                        texts.media_type_refused if isinstance(exc, AttachmentTypeError) else texts.media_unreachable
                    )
                await self.delivery.reply(message.target, reply)
        return tuple(stored)

    async def _turn(
        self, message: InboundMessage, text: str, texts: ChatTexts, attachments: tuple[Attachment, ...] = ()
    ) -> None:
        target = message.target
        turn = Turn(
            thread_id=target.thread_id,
            actor=message.actor,
            text=text,
            ui_capabilities=self.delivery.options.capabilities or self.delivery.port.capabilities,
            page_context=dict(message.page_context),
            channel=self.via,
            agent=message.agent,
            attachments=attachments,
        )
        try:
            accepted = await self.services.send(turn)
        except UnknownAgentError as exc:  # the agent this chat maps to is kept for roles the sender lacks
            logger.info("refused a %s message from %s: %s", self.via, actor_hash(target.address), exc)
            await self.delivery.reply(target, texts.unknown_sender)
            return
        except RateLimitedError as exc:
            await self.delivery.reply(target, texts.rate_limited.format(seconds=max(1, round(exc.retry_after))))
            return
        except QueueFullError:
            await self.delivery.reply(target, texts.queue_full)
            return
        except QuotaExceededError as exc:
            await self.delivery.reply(target, texts.quota_exceeded(exc.period))
            return
        except (ThreadBusyError, ThreadParkedError):
            await self.delivery.reply(target, texts.busy)  # an agent whose queue_mode is "reject"
            return
        if accepted.queued is not None and not accepted.interrupting:
            await self._remind(target, message.actor, texts)

    async def _remind(self, target: PushTarget, actor: Actor, texts: ChatTexts) -> None:
        """Say what a message queued behind an approval waits for, and send its buttons again."""
        runtime = self.services.runtime
        pending = await runtime.pending_approvals(target.thread_id)
        if not pending:
            return  # behind a running run: its answer comes first, then this one's
        mine = [a for a in pending if runtime.approval_policy.can_decide(actor, a)]
        await self.delivery.reply(target, texts.waits_for_approval if mine else texts.waits_for_someone)
        port = self.delivery.port
        for approval in mine:
            number = pending.index(approval) + 1 if len(pending) > 1 else None
            event = ApprovalFlow.requested_event(approval)
            tokens = await self.delivery.approvals.tokens(event, target)
            for index, part in enumerate(await port.approval_parts(target, event, tokens, number)):
                if isinstance(part, Undeliverable):
                    continue  # outside the window: the card already sent is still there
                try:
                    message_id = await port.send(target, part)
                except PushSendError as exc:
                    logger.error("approval reminder to %s not sent: %s", actor_hash(target.address), exc)
                    return
                await port.sent(target, part, message_id, {"seq": 0, "part": index, "event": "approval-requested"})


_ACTIVE = frozenset({"running", "awaiting-approval"})
