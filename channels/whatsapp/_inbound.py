"""What happens to an inbound WhatsApp message, once the webhook accepted it.

The sender is resolved to an actor (or refused politely), their 24 h window is opened, and the
message goes to the shared ``gateway.ChatInbound``: a tapped approval button, a typed decision
(``yes``, ``não 2``) while an approval waits, or a turn for the agent. Both providers (Twilio
and the Cloud API) hand their messages here as a ``WhatsAppInbound``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway import (
    BUTTON_PREFIX,
    ChannelServices,
    ChatInbound,
    InboundMessage,
    MediaSource,
    ProviderMedia,
    PushDelivery,
    PushTarget,
    fetch_media,
    one_line,
)
from gateway import InboundOptions as ChatOptions
from gateway.events import MAX_ATTACHMENTS, Attachment
from tools import Actor

from ._identity import SenderResolver, ThreadNamer, WhatsAppSender, language_for
from ._state import ChannelState

__all__ = ["TWILIO_MEDIA", "InboundHandler", "InboundOptions", "WhatsAppInbound"]

logger = logging.getLogger("channels.whatsapp.inbound")

_TEXT_TYPES = frozenset({"", "text", "button", "interactive"})

TWILIO_MEDIA = MediaSource(hosts=frozenset({"api.twilio.com", "media.twiliocdn.com", "mms.twiliocdn.com"}))
"""Where Twilio's ``MediaUrl<n>`` may point: its API, and the hosts its media URLs redirect to."""


@dataclass(frozen=True, kw_only=True)
class InboundOptions(ChatOptions):
    """Limits of inbound messages: the kit's, with WhatsApp's own message length."""

    max_chars: int = 4096
    """Longer messages are refused with a note (WhatsApp itself allows 4096)."""
    media: MediaSource | None = None
    """Where the provider's media may be fetched from; ``None``: the provider's own hosts
    (``TWILIO_MEDIA``, the Cloud API's ``GRAPH_MEDIA``). Tests name their loopback server."""


@dataclass(frozen=True, kw_only=True)
class WhatsAppInbound:
    """One accepted message, whichever provider carried it."""

    sender: WhatsAppSender
    text: str = ""
    button: str | None = None
    """A tapped button's payload (``agora:<token>``)."""
    has_media: bool = False
    media: tuple[ProviderMedia, ...] = ()
    """Media the provider can give us (fetched once the sender is known)."""
    message_id: str = ""
    agent: str | None = None
    """The agent it talks to (the business number's, by the channel's options); the default when ``None``."""


class InboundHandler:
    """Handles accepted inbound messages (one sender at a time on this process)."""

    def __init__(
        self,
        *,
        services: ChannelServices,
        state: ChannelState,
        delivery: PushDelivery[Any],
        resolver: SenderResolver,
        thread_for: ThreadNamer,
        languages: Mapping[str, Sequence[str]],
        options: InboundOptions | None = None,
        via: str = "whatsapp",
        media_auth: Mapping[str, str] | None = None,
        agent_for: Callable[[str], str | None] | None = None,
    ) -> None:
        self.services = services
        self.state = state
        self.delivery = delivery
        self.resolver = resolver
        self.thread_for = thread_for
        self.languages = languages
        self.options = options or InboundOptions()
        self.agent_for = agent_for
        """The agent of a message sent to a business number (``To``), ``None`` for the default."""
        self.media_auth = dict(media_auth or {})
        """Twilio's account SID and auth token: its media URLs want them (basic auth)."""
        self.chat = ChatInbound(
            services,
            delivery,
            via=via,
            options=self.options,
        )

    async def handle(self, fields: dict[str, Any]) -> None:
        """Handle one Twilio message (its webhook fields); never raises but for cancellation."""
        try:
            sender = WhatsAppSender.from_webhook(
                str(fields.get("From") or ""), fields.get("WaId"), fields.get("ProfileName")
            )
        except ValueError:
            logger.warning(
                "inbound message %s ignored: not from a WhatsApp number", one_line(str(fields.get("MessageSid")), 80)
            )
            return
        payload = str(fields.get("ButtonPayload") or "")
        button = payload if payload.startswith(BUTTON_PREFIX) else None
        body = str(fields.get("Body") or "").strip() or ("" if button else payload)
        await self.handle_message(
            WhatsAppInbound(
                sender=sender,
                text=body,
                button=button,
                has_media=_has_media(fields),
                media=self._twilio_media(fields),
                message_id=str(fields.get("MessageSid") or ""),
                agent=self.agent_for(str(fields.get("To") or "")) if self.agent_for is not None else None,
            )
        )

    def _twilio_media(self, fields: dict[str, Any]) -> tuple[ProviderMedia, ...]:
        """``MediaUrl0..n`` (with ``MediaContentType0..n``), each fetched with the account's credentials."""
        try:
            count = min(int(fields.get("NumMedia") or 0), MAX_ATTACHMENTS)
        except ValueError:
            count = 0
        source = self.options.media or TWILIO_MEDIA
        found: list[ProviderMedia] = []
        for index in range(count):
            url = str(fields.get(f"MediaUrl{index}") or "")
            claimed = str(fields.get(f"MediaContentType{index}") or "")
            if not url:
                continue

            async def fetch(actor: Actor, thread_id: str, url: str = url, claimed: str = claimed) -> Attachment:
                return await fetch_media(
                    self.services.attachments,
                    url=url,
                    source=source,
                    actor=actor,
                    thread_id=thread_id,
                    claimed_mime=claimed,
                    headers=self.media_auth,
                )

            found.append(ProviderMedia(fetch=fetch, kind=claimed))
        return tuple(found)

    async def handle_message(self, message: WhatsAppInbound) -> None:
        """Handle one accepted message (a sender's in arrival order); never raises but for cancellation."""
        async with self.chat.in_order(message.sender.e164):
            await self._handle_message(message)

    async def _handle_message(self, message: WhatsAppInbound) -> None:
        sender = message.sender
        language = language_for(sender, self.languages)
        try:
            actor = await self.resolver.resolve(sender)
        except Exception:
            logger.exception("resolving a WhatsApp sender failed")  # never the number: see gateway._logs
            return
        if actor is None:
            await self.state.touch_sender(sender.e164, address=sender.address, language=language, thread_id=None)
            await self.chat.refuse(_target("", sender, "", language))
            return
        thread_id = self.thread_for(actor, sender)
        await self.state.touch_sender(sender.e164, address=sender.address, language=language, thread_id=thread_id)
        target = _target(thread_id, sender, actor.id, language)
        redeemed = await self.chat.handle(
            InboundMessage(
                target=target,
                actor=actor,
                text=message.text,
                button=message.button,
                has_media=message.has_media,
                media=message.media,
                page_context={"channel": {"name": self.chat.via, "profile_name": sender.profile_name}},
                agent=message.agent,
            )
        )
        if redeemed is not None and redeemed.reply:
            await self.delivery.reply(target, redeemed.reply)


def _target(thread_id: str, sender: WhatsAppSender, actor_id: str, language: str) -> PushTarget:
    return PushTarget(
        thread_id=thread_id, address=sender.address, actor_id=actor_id, language=language, extra={"e164": sender.e164}
    )


def _has_media(fields: dict[str, Any]) -> bool:
    try:
        count = int(fields.get("NumMedia") or 0)
    except ValueError:
        count = 0
    kind = str(fields.get("MessageType") or "").lower()
    return count > 0 or kind not in _TEXT_TYPES
