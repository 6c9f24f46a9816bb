"""Status callbacks: what Twilio reports about each message after accepting it.

Twilio accepts a message (201, ``queued``) and tells later, on ``/channels/whatsapp/status``,
whether it was ``sent``, ``delivered``, ``read``, or ``failed`` / ``undelivered`` with an
``ErrorCode``. Every status is recorded; a failure is logged, and resent when its code says a
resend may work (a queue overflow, an unknown error, a rate limit). An approval refused for being
outside the 24 h window (63016) goes again with the approved template. Anything else is
recorded in the thread's failures.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from ._outbound import DeliveryOptions, WhatsAppDelivery
from ._sender import OutboundMessage, TwilioSender, WhatsAppSendError
from ._state import ChannelState

__all__ = ["RETRYABLE_STATUS_CODES", "StatusCallbacks"]

logger = logging.getLogger("channels.whatsapp.status")

RETRYABLE_STATUS_CODES = frozenset({"30001", "30008", "63018"})
"""Error codes worth a resend: queue overflow, unknown error, WhatsApp rate limit."""
OUTSIDE_WINDOW = "63016"


class StatusCallbacks:
    """Records status callbacks and resends what may succeed again."""

    def __init__(
        self,
        *,
        state: ChannelState,
        sender: TwilioSender,
        delivery: WhatsAppDelivery,
        template_sid: str | None,
        options: DeliveryOptions,
    ) -> None:
        self.state = state
        self.sender = sender
        self.delivery = delivery
        self.template_sid = template_sid
        self.options = options

    async def on_status(self, form: dict[str, str]) -> None:
        """Record one callback; resend (in a task the delivery owns) what Twilio says may work."""
        sid = form.get("MessageSid") or form.get("SmsSid") or ""
        status = form.get("MessageStatus") or form.get("SmsStatus") or ""
        code = form.get("ErrorCode") or None
        record = {"status": status, "error_code": code, "error": form.get("ErrorMessage"), "at": time.time()}
        if not sid or not await self.state.record_status(sid, record):
            return  # Twilio repeats callbacks: act on each status once
        if status not in ("failed", "undelivered"):
            return
        sent = await self.state.sent(sid)
        logger.warning("message %s %s (error %s) for %s", sid, status, code, (sent or {}).get("thread_id", "?"))
        if sent is None:
            return
        message = OutboundMessage.from_json(sent["message"])
        template = self.template_sid
        if code == OUTSIDE_WINDOW and sent.get("event") == "approval-requested" and template:
            if message.content_sid == template:
                await self.state.give_up(sent, f"twilio {code}: even the template was refused")
                return
            logger.warning(
                "message %s was outside the 24 h window; resending the approval with template %s", sid, template
            )
            message = replace(message, content_sid=template, content_variables={"2": "-", **message.content_variables})
        elif code not in RETRYABLE_STATUS_CODES or int(sent.get("resends", 0)) >= self.options.max_status_resends:
            await self.state.give_up(sent, f"twilio {code or status}")
            return
        self.delivery.spawn(self._resend(message, sent), name=f"agora-wa-resend-{sid}")

    async def _resend(self, message: OutboundMessage, sent: dict[str, Any]) -> None:
        try:
            sid = await self.sender.send(message)
        except WhatsAppSendError as exc:
            await self.state.give_up(sent, str(exc))
            return
        resends = int(sent.get("resends", 0)) + 1
        await self.state.record_sent(sid, {**sent, "message": message.to_json(), "resends": resends})
