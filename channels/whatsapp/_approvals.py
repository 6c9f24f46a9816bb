"""Approvals on WhatsApp through Twilio: quick-reply buttons from Content API templates.

An ``approval-requested`` event becomes one message of a Content API ``twilio/quick-reply``
template (a ``twilio/text`` twin serves clients without buttons): approve (the verb), reject,
and "Always" (approve and remember) where the policy lets the decision be remembered. Templates are created once per
text shape (language, labels, instruction) and cached in the store; the filled title, detail and
the two button payloads travel as ``content_variables``. The payloads are the push kit's
single-use tokens (``agora:<token>``, ``gateway.ChatApprovals``): nothing about the decision can
be read from them or forged.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from gateway import BUTTON_PREFIX, ApprovalTokens, ChatTexts, PushTarget
from gateway.events import ApprovalRequestedEvent

from ._sender import OutboundMessage, TwilioSender
from ._state import ChannelState

__all__ = ["BUTTON_PREFIX", "MAX_BUTTON_TITLE", "ApprovalButtons", "button_title"]

logger = logging.getLogger("channels.whatsapp.approvals")

MAX_BUTTON_TITLE = 20
"""WhatsApp cuts quick-reply titles longer than this."""
_MAX_TITLE = 300
_MAX_DETAIL = 500


def button_title(label: str, fallback: str) -> str:
    """A button title of at most 20 characters (``fallback`` when ``label`` is blank)."""
    label = " ".join(label.split()) or fallback
    return label if len(label) <= MAX_BUTTON_TITLE else label[: MAX_BUTTON_TITLE - 1].rstrip() + "…"


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass(frozen=True, kw_only=True)
class _Shape:
    """The fixed text of an approval template; one Content template per shape."""

    language: str
    approve: str
    reject: str
    instruction: str
    has_detail: bool
    always: str = ""
    """The third button's title; empty for two buttons."""

    @property
    def key(self) -> str:
        parts: list[Any] = [self.language, self.approve, self.reject, self.instruction, self.has_detail]
        if self.always:
            parts.append(self.always)  # two-button shapes keep the key (and template) they had
        raw = json.dumps(parts)
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:24]

    def request(self) -> dict[str, Any]:
        """The ``ContentCreateRequest`` payload."""
        head = "{{1}}\n{{2}}" if self.has_detail else "{{1}}"
        samples = {"1": "Refund order 1042?", "3": f"{BUTTON_PREFIX}approve", "4": f"{BUTTON_PREFIX}reject"}
        if self.has_detail:
            samples["2"] = "Burr grinder"
        actions = [
            {"type": "QUICK_REPLY", "title": self.approve, "id": "{{3}}"},
            {"type": "QUICK_REPLY", "title": self.reject, "id": "{{4}}"},
        ]
        if self.always:
            samples["5"] = f"{BUTTON_PREFIX}always"
            actions.append({"type": "QUICK_REPLY", "title": self.always, "id": "{{5}}"})
        return {
            "friendly_name": f"agora_approval_{self.key}",
            "language": self.language.replace("-", "_"),
            "variables": samples,
            "types": {
                "twilio/quick-reply": {
                    "body": f"{head}\n\n{self.instruction}",
                    "actions": actions,
                },
                "twilio/text": {"body": f"{head}\n\n{self.instruction}"},
            },
        }


class ApprovalButtons:
    """Builds approval messages from Content templates (created once per text shape)."""

    def __init__(self, state: ChannelState, sender: TwilioSender | None, *, template_sid: str | None = None) -> None:
        self.state = state
        self.sender = sender
        self.template_sid = template_sid
        self._content: dict[str, str] = {}
        self._creating: dict[str, asyncio.Lock] = {}

    async def content_sid(self, texts: ChatTexts, verb: str, *, has_detail: bool, always: bool = False) -> str:
        """The Content template of this text shape, created on first use and cached in the store.

        Raises:
            WhatsAppSendError: Twilio could not create it.
        """
        shape = _Shape(
            language=texts.language,
            approve=button_title(verb, texts.approve),
            reject=button_title(texts.reject, "Reject"),
            instruction=texts.instruction,
            has_detail=has_detail,
            always=button_title(texts.always, "Always") if always else "",
        )
        if shape.approve.casefold() == shape.reject.casefold():
            shape = _Shape(**{**shape.__dict__, "approve": button_title(texts.approve, "Approve")})
        cached = self._content.get(shape.key)
        if cached:
            return cached
        lock = self._creating.setdefault(shape.key, asyncio.Lock())
        async with lock:
            sid = self._content.get(shape.key) or await self.state.get(self.state.key("content", shape.key))
            if not isinstance(sid, str):
                if self.sender is None:
                    raise RuntimeError("no Twilio client to create content templates with")
                sid = await self.sender.create_content(shape.request())
                await self.state.set(self.state.key("content", shape.key), sid)
                logger.info("created approval template %s for %s (%s)", sid, texts.language, shape.approve)
            self._content[shape.key] = sid
            return sid

    async def message(
        self,
        event: ApprovalRequestedEvent,
        target: PushTarget,
        texts: ChatTexts,
        tokens: ApprovalTokens,
        *,
        number: int | None,
        in_window: bool,
    ) -> OutboundMessage | None:
        """The approval request as a quick-reply message (a template outside the 24 h window).

        ``number`` prefixes the title when several approvals wait. ``None`` when the window is
        closed and no approved template is configured: the request cannot be sent.
        """
        confirmation = event.confirmation
        title = _clip(confirmation.title, _MAX_TITLE)
        if number is not None:
            title = f"({number}) {title}"
        detail = _clip(confirmation.detail or "", _MAX_DETAIL)
        variables = {"1": title, "3": tokens.payload(True), "4": tokens.payload(False)}
        if detail:
            variables["2"] = detail
        always = bool(tokens.always) and in_window  # the approved template outside the window has two
        if always:
            variables["5"] = tokens.payload(True, remember=True)
        if not in_window:
            if not self.template_sid:
                return None
            logger.warning(
                "thread %s: %s wrote more than 24 h ago; asking for approval %s with template %s",
                event.thread_id,
                target.extra.get("e164", target.address),
                event.tool_call_id,
                self.template_sid,
            )
            variables.setdefault("2", "-")
            return OutboundMessage(to=target.address, content_sid=self.template_sid, content_variables=variables)
        sid = await self.content_sid(texts, confirmation.verb, has_detail=bool(detail), always=always)
        return OutboundMessage(to=target.address, content_sid=sid, content_variables=variables)
