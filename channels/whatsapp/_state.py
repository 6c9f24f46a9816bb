"""What the WhatsApp channel keeps in the store's channel state, beside push delivery's keys.

The keys of delivery, approvals and refusals are the push kit's (``gateway._push._state``); the
ones below are WhatsApp's own. Every key starts with the channel's prefix (``wa`` by default).

================================  ==========================================================  =======
key                               value                                                       ttl
================================  ==========================================================  =======
``{p}:msg:{MessageSid}``          claimed once per inbound message (dedupe)                   24 h
``{p}:sender:{e164}``             ``{address, last_inbound, language, thread_id}``             30 d
``{p}:content:{shape}``           the Content sid of one approval text shape                  none
``{p}:status-last:{MessageSid}``  the last status callback                                    3 d
``{p}:status:{MessageSid}:{st}``  claimed once per status of a message (Twilio repeats them)  3 d
================================  ==========================================================  =======

(The last status used to be ``{p}:status:{MessageSid}``, the claim's kind with one part fewer:
the claim of ``SM1`` being ``delivered`` was the last status of a message ``SM1:delivered``.)
"""

from __future__ import annotations

import time
from typing import Any

from gateway import PushCursor, PushState, PushTarget
from gateway.stores import Store

__all__ = ["DAY", "ChannelState", "Conversation", "Cursor"]

DAY = 24 * 3600.0
_KEEP = 30 * DAY

Conversation = PushTarget
"""Where a thread's events go: ``address`` is ``whatsapp:+E164``, ``extra["e164"]`` the number."""
Cursor = PushCursor


class ChannelState(PushState):
    """Typed access to the WhatsApp channel's keys in a ``Store``."""

    def __init__(self, store: Store, prefix: str = "wa") -> None:
        super().__init__(store, prefix)

    async def claim_message(self, message_id: str) -> bool:
        """True the first time a provider's message id is seen (for 24 h)."""
        return await self.claim(self.key("msg", message_id), ttl=DAY)

    async def sender(self, e164: str) -> dict[str, Any] | None:
        """The sender's record (last inbound time, language, thread)."""
        value = await self.get(self.key("sender", e164))
        return value if isinstance(value, dict) else None

    async def touch_sender(self, e164: str, *, address: str, language: str, thread_id: str | None) -> None:
        """Record an inbound message: it opens (or extends) the 24 h window."""
        record = {"address": address, "last_inbound": time.time(), "language": language, "thread_id": thread_id}
        await self.set(self.key("sender", e164), record, ttl=_KEEP)

    async def last_inbound(self, e164: str) -> float | None:
        """When the sender last wrote (epoch seconds)."""
        record = await self.sender(e164)
        value = record.get("last_inbound") if record else None
        return float(value) if isinstance(value, int | float) else None

    async def record_status(self, message_id: str, status: dict[str, Any]) -> bool:
        """Record a status callback; False when this exact status was already recorded."""
        fresh = await self.claim(self.key("status", message_id, str(status.get("status"))), ttl=3 * DAY, value=status)
        if fresh:
            await self.set(self.key("status-last", message_id), status, ttl=3 * DAY)
        return fresh

    async def status(self, message_id: str) -> dict[str, Any] | None:
        """The last status the provider reported for a message."""
        value = await self.get(self.key("status-last", message_id))
        return value if isinstance(value, dict) else None
