"""What happens to an inbound WhatsApp message, once the webhook accepted it.

The sender is resolved to an actor (or refused politely), their 24 h window is opened, their
thread is bound to their number, then the message is, in this order: a tapped approval button,
a typed decision (``yes``, ``não 2``) while an approval waits, or a turn for the agent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway import GatewayServices, RateLimitedError, ThreadBusyError
from gateway.events import Turn
from tools import Actor

from ._approvals import BUTTON_PREFIX, ApprovalButtons
from ._identity import SenderResolver, ThreadNamer, WhatsAppSender, language_for
from ._outbound import WhatsAppDelivery
from ._state import ChannelState, Conversation
from ._texts import WhatsAppTexts, parse_decision

__all__ = ["InboundHandler", "InboundOptions"]

logger = logging.getLogger("channels.whatsapp.inbound")

_TEXT_TYPES = frozenset({"", "text", "button", "interactive"})


@dataclass(frozen=True, kw_only=True)
class InboundOptions:
    """Limits of inbound messages."""

    max_chars: int = 4096
    """Longer messages are refused with a note (WhatsApp itself allows 4096)."""
    busy_wait: float = 30.0
    """Seconds to wait for the previous turn of the thread to finish before saying "busy"."""
    refusal_every: float = 3600.0
    """An unknown sender hears the refusal at most once per this many seconds."""


class InboundHandler:
    """Handles accepted inbound messages (one sender at a time on this process)."""

    def __init__(
        self,
        *,
        services: GatewayServices,
        state: ChannelState,
        delivery: WhatsAppDelivery,
        buttons: ApprovalButtons,
        resolver: SenderResolver,
        thread_for: ThreadNamer,
        texts_for: Callable[[str | None], WhatsAppTexts],
        languages: dict[str, list[str]],
        options: InboundOptions | None = None,
    ) -> None:
        self.services = services
        self.state = state
        self.delivery = delivery
        self.buttons = buttons
        self.resolver = resolver
        self.thread_for = thread_for
        self.texts_for = texts_for
        self.languages = languages
        self.options = options or InboundOptions()
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    async def handle(self, fields: dict[str, Any]) -> None:
        """Handle one message (its webhook fields); never raises but for cancellation."""
        try:
            sender = WhatsAppSender.from_webhook(
                str(fields.get("From") or ""), fields.get("WaId"), fields.get("ProfileName")
            )
        except ValueError:
            logger.warning(
                "inbound message %s from %r ignored: no WhatsApp sender", fields.get("MessageSid"), fields.get("From")
            )
            return
        # One message of a sender at a time (here), in arrival order: "hi" then "refund 1042".
        lock, users = self._locks.get(sender.e164) or (asyncio.Lock(), 0)
        self._locks[sender.e164] = (lock, users + 1)
        try:
            async with lock:
                await self._handle(sender, fields)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("inbound message %s from %s failed", fields.get("MessageSid"), sender.e164)
            await self.delivery.reply(sender.address, self.texts_for(language_for(sender, self.languages)).failed)
        finally:
            lock, users = self._locks[sender.e164]
            if users <= 1:
                del self._locks[sender.e164]
            else:
                self._locks[sender.e164] = (lock, users - 1)

    async def _handle(self, sender: WhatsAppSender, fields: dict[str, Any]) -> None:
        language = language_for(sender, self.languages)
        texts = self.texts_for(language)
        actor = await self.resolver.resolve(sender)
        if actor is None:
            await self.state.touch_sender(sender.e164, address=sender.address, language=language, thread_id=None)
            if await self.state.store.channel_claim(
                self.state.key("refused", sender.e164), ttl=self.options.refusal_every
            ):
                logger.info("refused unknown WhatsApp sender %s", sender.e164)
                await self.delivery.reply(sender.address, texts.unknown_sender)
            return
        thread_id = self.thread_for(actor, sender)
        await self.state.touch_sender(sender.e164, address=sender.address, language=language, thread_id=thread_id)
        await self._bind(thread_id, sender, actor, language)
        payload = str(fields.get("ButtonPayload") or "")
        if payload.startswith(BUTTON_PREFIX):
            reply = await self.buttons.decide_button(
                self.services.runtime, payload, to=sender.address, actor=actor, texts=texts
            )
            if reply:
                await self.delivery.reply(sender.address, reply)
            return
        body = str(fields.get("Body") or "").strip() or payload  # a template's static button sends its id
        if _has_media(fields):
            await self.delivery.reply(sender.address, texts.media_unsupported)
            if not body:
                return
        if not body:
            return
        if len(body) > self.options.max_chars:
            await self.delivery.reply(sender.address, texts.too_long.format(limit=self.options.max_chars))
            return
        decision = parse_decision(body)
        if decision is not None:
            try:
                reply = await self.buttons.decide_text(
                    self.services.runtime, thread_id, decision, actor=actor, texts=texts
                )
            except LookupError:
                pass  # nothing waits: "yes" is an ordinary answer to the agent
            else:
                if reply:
                    await self.delivery.reply(sender.address, reply)
                return
        await self._turn(thread_id, actor, sender, body, texts)

    async def _bind(self, thread_id: str, sender: WhatsAppSender, actor: Actor, language: str) -> None:
        conversation = Conversation(
            thread_id=thread_id, to=sender.address, e164=sender.e164, actor_id=actor.id, language=language
        )
        current = await self.state.conversation(thread_id)
        if current != conversation:
            await self.state.bind(conversation, start_seq=await self.services.runtime.store.last_seq(thread_id))
        self.delivery.bound(thread_id)

    async def _turn(
        self, thread_id: str, actor: Actor, sender: WhatsAppSender, text: str, texts: WhatsAppTexts
    ) -> None:
        turn = Turn(
            thread_id=thread_id,
            actor=actor,
            text=text,
            ui_capabilities=self.delivery.options.capabilities,
            page_context={"channel": {"name": "whatsapp", "profile_name": sender.profile_name}},
            channel="whatsapp",
        )
        for attempt in (1, 2):
            try:
                await self.services.start_turn(turn)
                return
            except RateLimitedError as exc:
                await self.delivery.reply(
                    sender.address, texts.rate_limited.format(seconds=max(1, round(exc.retry_after)))
                )
                return
            except ThreadBusyError:
                if attempt == 2 or not await self._wait_for_thread(thread_id):
                    await self.delivery.reply(sender.address, texts.busy)
                    return

    async def _wait_for_thread(self, thread_id: str) -> bool:
        """Wait (at most ``busy_wait``) for the thread's running run; True if it stopped."""
        runtime = self.services.runtime
        running = [r for r in await runtime.store.thread_runs(thread_id) if r.status == "running"]
        if not running:
            return True
        try:
            await runtime.wait(running[-1].run_id, timeout=self.options.busy_wait)
        except TimeoutError:
            return False
        return True


def _has_media(fields: dict[str, Any]) -> bool:
    try:
        count = int(fields.get("NumMedia") or 0)
    except ValueError:
        count = 0
    kind = str(fields.get("MessageType") or "").lower()
    return count > 0 or kind not in _TEXT_TYPES
