"""Delivering a thread's events to WhatsApp: the Twilio port of the shared push delivery.

The durable part (cursor per thread, lease, retries, drains after an outage) is
``gateway.PushDelivery``; the shared wording of events is ``gateway.PushPort``'s hooks. What is
WhatsApp's own is here:

- text is converted to WhatsApp's markup and split at 1600 characters;
- approvals are Content API quick-reply buttons (``ApprovalButtons``), or the approved template
  outside the 24 h window;
- components go as one image or PDF per message with the component's text as caption;
- nothing but approvals (by template) goes out after 24 h without an inbound message: those
  parts are recorded as ``outside_window``;
- staff: an approval a role decides goes to the numbers of ``AGORA_WHATSAPP_ROLES`` holding the
  role (``staff_targets``; resolved by the channel's resolver, so a tap is theirs), with buttons.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gateway import (
    ApprovalTokens,
    DeliveredUi,
    PushDelivery,
    PushOptions,
    PushPort,
    PushTarget,
    StaffMember,
    Undeliverable,
    clip,
    to_whatsapp,
)
from gateway.events import ApprovalRequestedEvent, RunEvent
from tools import UiCapabilities

from ._approvals import ApprovalButtons
from ._markdown import MAX_BODY, split_message
from ._sender import OutboundMessage, TwilioSender
from ._state import DAY, ChannelState

__all__ = ["WHATSAPP_CAPABILITIES", "DeliveryOptions", "WhatsAppDelivery", "WhatsAppPort"]

WHATSAPP_CAPABILITIES = UiCapabilities(formats=["image", "pdf", "text"])
"""What a WhatsApp conversation shows: images, then PDFs, then text (docs/architecture.md, "Components")."""

MAX_CAPTION = 1024


@dataclass(frozen=True, kw_only=True)
class DeliveryOptions(PushOptions):
    """Timing of delivery (``PushOptions``) and WhatsApp's own limits; tests shrink these."""

    max_status_resends: int = 2
    """Resends of a message whose status callback reports a retryable failure (``StatusCallbacks``)."""
    window: float = DAY - 60
    """The customer-service window: free-form messages only this long after the last inbound."""
    capabilities: UiCapabilities | None = WHATSAPP_CAPABILITIES
    """What the conversations show (``formats=["text"]`` sends every component as text)."""


WhatsAppDelivery = PushDelivery[OutboundMessage]
"""The channel's delivery: ``gateway.PushDelivery`` over ``WhatsAppPort``."""


class WhatsAppPort(PushPort[OutboundMessage]):
    """WhatsApp's parts of each event, sent through Twilio."""

    via = "whatsapp"
    capabilities = WHATSAPP_CAPABILITIES

    def __init__(
        self,
        *,
        state: ChannelState,
        sender: TwilioSender,
        buttons: ApprovalButtons,
        window: float,
        staff: Callable[[str], Awaitable[list[StaffMember]]] | None = None,
    ) -> None:
        self.state = state
        self.sender = sender
        self.buttons = buttons
        self.window = window
        self.staff = staff
        """The staff chats holding a role (the channel's configured numbers), when set."""

    async def staff_targets(self, role: str) -> list[StaffMember]:
        return await self.staff(role) if self.staff is not None else []

    async def in_window(self, target: PushTarget) -> bool:
        """Whether the sender wrote within the 24 h customer-service window."""
        last = await self.state.last_inbound(target.extra.get("e164", ""))
        return last is not None and time.time() - last <= self.window

    async def closed(self, target: PushTarget, event: RunEvent) -> str | None:
        return None if await self.in_window(target) else "outside_window"

    def text_parts(self, target: PushTarget, markdown: str) -> list[OutboundMessage]:
        return [OutboundMessage(to=target.address, body=body) for body in split_message(to_whatsapp(markdown))]

    def line_parts(self, target: PushTarget, text: str) -> list[OutboundMessage]:
        return [OutboundMessage(to=target.address, body=body) for body in split_message(text, MAX_BODY)]

    async def media_parts(self, target: PushTarget, delivered: DeliveredUi) -> list[OutboundMessage]:
        text = delivered.text or ""
        caption = clip(to_whatsapp(text), MAX_CAPTION) if text else None
        return [
            OutboundMessage(to=target.address, media_url=item.url, body=caption if index == 0 else None)
            for index, item in enumerate(delivered.media)
        ]

    async def approval_parts(
        self, target: PushTarget, event: ApprovalRequestedEvent, tokens: ApprovalTokens, number: int | None
    ) -> list[Any]:
        in_window = await self.in_window(target)
        message = await self.buttons.message(
            event, target, self.texts(target), tokens, number=number, in_window=in_window
        )
        return [message if message is not None else Undeliverable("outside_window_no_template")]

    async def send(self, target: PushTarget, part: OutboundMessage) -> str | None:
        return await self.sender.send(part)
