"""``CloudPort``: how run events become Cloud API messages, and how one is sent.

The kit's ``PushPort`` words the events; this port says what the words become on the Graph API
(``_cloud_parts``): text split at 4096 characters after the WhatsApp Markdown conversion,
components uploaded to ``/media`` and sent as ``image`` / ``document`` by id, approvals as
interactive reply buttons (``agora:<token>`` ids) within the 24 h window and as the configured
template outside it (recorded undeliverable when there is none). Other free-form messages
outside the window are recorded ``outside_window``, not sent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from gateway import (
    ApprovalTokens,
    DeliveredUi,
    PushPort,
    PushSendError,
    PushTarget,
    RetryPolicy,
    StaffMember,
    Undeliverable,
    split_message,
    to_whatsapp,
)
from gateway.events import ApprovalRequestedEvent, RunEvent

from ._cloud_api import GraphClient
from ._cloud_options import WhatsAppCloudOptions
from ._cloud_parts import MAX_TEXT, Button, CloudPart, approval_buttons, approval_template, media_part, text_part
from ._outbound import WHATSAPP_CAPABILITIES
from ._state import ChannelState

__all__ = ["CLOUD", "CloudPort"]

logger = logging.getLogger("channels.whatsapp.cloud")

CLOUD = "whatsapp-cloud"
"""The channel's name: how its decisions read (``via``) and its turns' ``channel``."""


class CloudPort(PushPort[CloudPart]):
    """The Cloud API's parts of delivery."""

    via = CLOUD
    capabilities = WHATSAPP_CAPABILITIES

    def __init__(
        self,
        *,
        client: GraphClient,
        options: WhatsAppCloudOptions,
        state: ChannelState,
        window: float,
        retry: RetryPolicy | None = None,
        staff: Callable[[str], Awaitable[list[StaffMember]]] | None = None,
    ) -> None:
        self.client = client
        self.options = options
        self.state = state
        self.window = window
        """The customer-service window (seconds after the sender's last message, as on Twilio)."""
        self.retry = retry or RetryPolicy()
        """Retries of one Graph request within a delivery round (429, 5xx, throttling, network)."""
        self.staff = staff
        """The staff chats holding a role (the channel's configured numbers), when set."""

    async def staff_targets(self, role: str) -> list[StaffMember]:
        return await self.staff(role) if self.staff is not None else []

    async def in_window(self, target: PushTarget) -> bool:
        """Whether the sender wrote within the 24 h customer-service window (WhatsApp's sender record)."""
        last = await self.state.last_inbound(target.extra.get("e164", ""))
        return last is not None and time.time() - last <= self.window

    def text_parts(self, target: PushTarget, markdown: str) -> list[CloudPart]:
        """The Markdown as WhatsApp text, one message per 4096 characters."""
        return [text_part(chunk) for chunk in split_message(to_whatsapp(markdown), MAX_TEXT)]

    async def media_parts(self, target: PushTarget, delivered: DeliveredUi) -> list[CloudPart]:
        """One image or document per stored page; the component's text captions the first."""
        caption = to_whatsapp(delivered.text) if delivered.text else None
        return [
            media_part(token=ref.token, mime=ref.mime, filename=ref.filename, caption=caption if index == 0 else None)
            for index, ref in enumerate(delivered.media)
        ]

    async def approval_parts(
        self, target: PushTarget, event: ApprovalRequestedEvent, tokens: ApprovalTokens, number: int | None
    ) -> list[Any]:
        """Reply buttons in the window; the approval template outside it (or undeliverable)."""
        texts = self.texts(target)
        confirmation = event.confirmation
        title = f"({number}) {confirmation.title}" if number else confirmation.title
        template = self._template(target, title, tokens)
        if not await self.in_window(target):
            if template is None:
                return [Undeliverable("outside_window_no_template")]
            logger.warning(
                "the sender wrote more than 24 h ago; asking for approval %s with template %s",
                event.tool_call_id,
                template["name"],
            )
            return [CloudPart(kind="template", content=template)]
        body = f"{title}\n\n{confirmation.detail}" if confirmation.detail else title
        footer = texts.instruction_numbered.format(n=number) if number else texts.instruction
        buttons = [
            Button(id=tokens.payload(True), title=confirmation.verb.strip() or texts.approve),
            Button(id=tokens.payload(False), title=texts.reject),
        ]
        return [approval_buttons(body=body, footer=footer, buttons=buttons, template=template)]

    def _template(self, target: PushTarget, title: str, tokens: ApprovalTokens) -> dict[str, Any] | None:
        name = self.options.approval_template
        if not name:
            return None
        language = self.options.approval_template_language or target.language.replace("-", "_")
        payloads = [tokens.payload(True), tokens.payload(False)]
        return approval_template(name=name, language=language, title=title, payloads=payloads)

    async def closed(self, target: PushTarget, event: RunEvent) -> str | None:
        """``outside_window`` when the person last wrote more than 24 h ago."""
        return None if await self.in_window(target) else "outside_window"

    async def send(self, target: PushTarget, part: CloudPart) -> str | None:
        """Upload the part's media (if any), then post the message; its ``wamid``.

        Raises:
            PushSendError: Graph refused it or could not be reached; the media expired.
        """
        if part.media is not None:
            stored = await self.services.media_bytes(part.media.token)
            if stored is None:
                raise PushSendError("the rendered media expired before it could be sent", retryable=False)
            data, media = stored[0], part.media
            media_id = await self.retry.run(
                lambda: self.client.upload_media(data, mime=media.mime, filename=media.filename), "Graph upload"
            )
            part = part.with_media_id(media_id)
        ready = part
        return await self.retry.run(
            lambda: self.client.send_message(target.address, ready.kind, ready.content), "Graph send"
        )
