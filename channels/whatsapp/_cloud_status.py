"""Status notifications: what Meta reports about each message after accepting it.

Meta accepts a message (``wamid``) and tells later, in the ``statuses[]`` of a notification,
whether it was ``sent``, ``delivered``, ``read`` or ``failed`` (with ``errors[].code``). Each
status of a message is recorded once (Meta repeats notifications). A failure is logged and:

- resent when its code says a resend may work (throughput, pair rate limit, a transient
  error), at most ``max_resends`` times;
- for an approval outside the 24 h window (``131047``, re-engagement), sent again as the
  configured template;
- otherwise given up on and recorded in the thread's failures.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from gateway import PushDelivery, PushSendError

from ._cloud_api import RETRYABLE_GRAPH_CODES
from ._cloud_parts import CloudPart
from ._cloud_webhook import CloudStatus
from ._state import ChannelState

__all__ = ["REENGAGEMENT", "RETRYABLE_STATUS_CODES", "CloudStatuses"]

logger = logging.getLogger("channels.whatsapp.cloud.status")

REENGAGEMENT = "131047"
"""More than 24 hours since the person last wrote: only a template may go."""
RETRYABLE_STATUS_CODES = frozenset({*(str(code) for code in RETRYABLE_GRAPH_CODES), "131000", "133004"})
"""Codes worth a resend: the throttling ones, ``131000`` (something went wrong), ``133004``
(server temporarily unavailable)."""


class CloudStatuses:
    """Records status notifications and resends what may succeed again."""

    def __init__(self, *, state: ChannelState, delivery: PushDelivery[CloudPart], max_resends: int = 2) -> None:
        self.state = state
        self.delivery = delivery
        self.max_resends = max_resends

    async def on_status(self, status: CloudStatus) -> None:
        """Record one status; resend (in a task the delivery owns) what may work now."""
        record = {"status": status.status, "codes": list(status.codes), "error": status.error, "at": time.time()}
        if not await self.state.record_status(status.id, record):
            return  # Meta repeats notifications: act on each status once
        if status.status != "failed":
            return
        sent = await self.state.sent(status.id)
        code = status.codes[0] if status.codes else None
        logger.warning(
            "message %s failed (error %s) for %s", status.id, code, (sent or {}).get("thread_id", "an unknown thread")
        )
        if sent is None:
            return
        part = CloudPart.from_json(sent["message"])
        resends = int(sent.get("resends", 0))
        if code == REENGAGEMENT and sent.get("event") == "approval-requested" and part.template is not None:
            logger.warning("message %s was outside the 24 h window; resending the approval as a template", status.id)
            part = CloudPart(kind="template", content=part.template)
        elif code not in RETRYABLE_STATUS_CODES or resends >= self.max_resends:
            await self.state.give_up(sent, f"whatsapp {code or status.status}")
            return
        self.delivery.spawn(self._resend(part, sent), name=f"agora-wac-resend-{status.id}")

    async def _resend(self, part: CloudPart, sent: dict[str, Any]) -> None:
        target = await self.delivery.target(str(sent.get("thread_id")))
        if target is None:
            await self.state.give_up(sent, "the thread is no longer delivered here")
            return
        try:
            message_id = await self.delivery.port.send(target, part)
        except PushSendError as exc:
            await self.state.give_up(sent, str(exc))
            return
        if message_id:
            resends = int(sent.get("resends", 0)) + 1
            await self.state.record_sent(message_id, {**sent, "message": part.to_json(), "resends": resends})
