"""Approvals on WhatsApp: quick-reply buttons whose payloads are single-use server tokens.

An ``approval-requested`` event becomes one message of a Content API ``twilio/quick-reply``
template (a ``twilio/text`` twin serves clients without buttons). Templates are created once per
text shape (language, labels, instruction) and cached in the store; the filled title, detail and
the two button payloads travel as ``content_variables``. A payload is ``agora:<token>``: the token
names, in the store, the tool call, the decision and the sender it was sent to. Nothing about
the decision can be read from it or forged.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway import (
    ApprovalExpiredError,
    ApprovalForbiddenError,
    ApprovalNotFoundError,
    ApprovalSettledError,
    Runtime,
)
from gateway.events import ApprovalRequestedEvent
from tools import Actor

from ._sender import OutboundMessage, TwilioSender
from ._state import DAY, ChannelState, Conversation
from ._texts import WhatsAppTexts

__all__ = ["BUTTON_PREFIX", "MAX_BUTTON_TITLE", "ApprovalButtons", "button_title"]

logger = logging.getLogger("channels.whatsapp.approvals")

BUTTON_PREFIX = "agora:"
"""Every button payload the gateway sends starts with this."""
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

    @property
    def key(self) -> str:
        raw = json.dumps([self.language, self.approve, self.reject, self.instruction, self.has_detail])
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:24]

    def request(self) -> dict[str, Any]:
        """The ``ContentCreateRequest`` payload."""
        head = "{{1}}\n{{2}}" if self.has_detail else "{{1}}"
        samples = {"1": "Refund order 1042?", "3": f"{BUTTON_PREFIX}approve", "4": f"{BUTTON_PREFIX}reject"}
        if self.has_detail:
            samples["2"] = "Burr grinder"
        return {
            "friendly_name": f"agora_approval_{self.key}",
            "language": self.language.replace("-", "_"),
            "variables": samples,
            "types": {
                "twilio/quick-reply": {
                    "body": f"{head}\n\n{self.instruction}",
                    "actions": [
                        {"type": "QUICK_REPLY", "title": self.approve, "id": "{{3}}"},
                        {"type": "QUICK_REPLY", "title": self.reject, "id": "{{4}}"},
                    ],
                },
                "twilio/text": {"body": f"{head}\n\n{self.instruction}"},
            },
        }


class ApprovalButtons:
    """Builds approval messages and redeems their buttons and typed answers."""

    def __init__(self, state: ChannelState, sender: TwilioSender | None, *, template_sid: str | None = None) -> None:
        self.state = state
        self.sender = sender
        self.template_sid = template_sid
        self._content: dict[str, str] = {}
        self._creating: dict[str, asyncio.Lock] = {}

    # -- sending ------------------------------------------------------------------------------------

    async def tokens(self, event: ApprovalRequestedEvent, conversation: Conversation) -> dict[str, Any]:
        """The approval's button tokens, made once (every process and every resend gets the same)."""
        key = self.state.key("appr", event.tool_call_id)
        existing = await self.state.store.channel_get(key)
        if isinstance(existing, dict):
            return existing
        ttl = self._ttl(event)
        record = {
            "approve": secrets.token_urlsafe(18),
            "reject": secrets.token_urlsafe(18),
            "title": event.confirmation.title,
            "thread_id": event.thread_id,
        }
        for decision in ("approve", "reject"):
            button = {
                "tool_call_id": event.tool_call_id,
                "approve": decision == "approve",
                "to": conversation.to,
                "actor_id": conversation.actor_id,
            }
            await self.state.store.channel_set(self.state.key("btn", record[decision]), button, ttl=ttl)
        if await self.state.store.channel_claim(key, ttl=ttl, value=record):
            return record
        for decision in ("approve", "reject"):  # another process won: its tokens are the ones sent
            await self.state.store.channel_delete(self.state.key("btn", record[decision]))
        existing = await self.state.store.channel_get(key)
        return existing if isinstance(existing, dict) else record

    @staticmethod
    def _ttl(event: ApprovalRequestedEvent) -> float:
        """Tokens outlive the approval by a day, so a late tap reads "expired", not "unknown"."""
        try:
            remaining = datetime.fromisoformat(event.expires_at).timestamp() - time.time()
        except ValueError:
            remaining = DAY
        return max(60.0, remaining) + DAY

    async def content_sid(self, texts: WhatsAppTexts, verb: str, *, has_detail: bool) -> str:
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
        )
        if shape.approve.casefold() == shape.reject.casefold():
            shape = _Shape(**{**shape.__dict__, "approve": button_title(texts.approve, "Approve")})
        cached = self._content.get(shape.key)
        if cached:
            return cached
        lock = self._creating.setdefault(shape.key, asyncio.Lock())
        async with lock:
            sid = self._content.get(shape.key) or await self.state.store.channel_get(
                self.state.key("content", shape.key)
            )
            if not isinstance(sid, str):
                if self.sender is None:
                    raise RuntimeError("no Twilio client to create content templates with")
                sid = await self.sender.create_content(shape.request())
                await self.state.store.channel_set(self.state.key("content", shape.key), sid)
                logger.info("created approval template %s for %s (%s)", sid, texts.language, shape.approve)
            self._content[shape.key] = sid
            return sid

    async def message(
        self,
        event: ApprovalRequestedEvent,
        conversation: Conversation,
        texts: WhatsAppTexts,
        *,
        number: int | None,
        in_window: bool,
    ) -> OutboundMessage | None:
        """The approval request as a quick-reply message (a template outside the 24 h window).

        ``number`` prefixes the title when several approvals wait. ``None`` when the window is
        closed and no approved template is configured: the request cannot be sent.
        """
        tokens = await self.tokens(event, conversation)
        confirmation = event.confirmation
        title = _clip(confirmation.title, _MAX_TITLE)
        if number is not None:
            title = f"({number}) {title}"
        detail = _clip(confirmation.detail or "", _MAX_DETAIL)
        variables = {"1": title, "3": BUTTON_PREFIX + tokens["approve"], "4": BUTTON_PREFIX + tokens["reject"]}
        if detail:
            variables["2"] = detail
        if not in_window:
            if not self.template_sid:
                return None
            logger.warning(
                "thread %s: %s wrote more than 24 h ago; asking for approval %s with template %s",
                event.thread_id,
                conversation.e164,
                event.tool_call_id,
                self.template_sid,
            )
            variables.setdefault("2", "-")
            return OutboundMessage(to=conversation.to, content_sid=self.template_sid, content_variables=variables)
        sid = await self.content_sid(texts, confirmation.verb, has_detail=bool(detail))
        return OutboundMessage(to=conversation.to, content_sid=sid, content_variables=variables)

    # -- deciding -----------------------------------------------------------------------------------

    async def decide_button(
        self, runtime: Runtime, payload: str, *, to: str, actor: Actor, texts: WhatsAppTexts
    ) -> str | None:
        """Decide the approval a tapped button names; the reply to send, ``None`` for none.

        The token must have been sent to this sender and not used; the runtime then checks that
        the actor may decide and that the approval is still pending.
        """
        token = payload.removeprefix(BUTTON_PREFIX)
        button = await self.state.store.channel_get(self.state.key("btn", token)) if token else None
        if not isinstance(button, dict):
            return texts.expired
        if button.get("to") != to or button.get("actor_id") != actor.id:
            logger.warning("%s tapped a button sent to %s; refused", to, button.get("to"))
            return texts.not_yours
        used_key = self.state.key("btn-used", token)
        if not await self.state.store.channel_claim(used_key, ttl=2 * DAY):
            return texts.already_decided
        try:
            await runtime.decide(button["tool_call_id"], actor, approve=bool(button["approve"]), via="whatsapp")
        except ApprovalSettledError:
            return texts.already_decided
        except (ApprovalExpiredError, ApprovalNotFoundError):
            return texts.expired
        except ApprovalForbiddenError:
            return texts.not_yours
        except Exception:
            await self.state.store.channel_delete(used_key)  # not decided: the button still works
            raise
        return None

    async def decide_text(
        self, runtime: Runtime, thread_id: str, decision: tuple[bool, int | None], *, actor: Actor, texts: WhatsAppTexts
    ) -> str | None:
        """Decide by a typed ``yes`` / ``no [n]``; the reply to send, ``None`` for none.

        Raises:
            LookupError: Nothing waits for this actor and no number was given: the text is an
                ordinary message, not a decision.
        """
        approve, number = decision
        pending = [
            a for a in await runtime.pending_approvals(thread_id) if runtime.approval_policy.can_decide(actor, a)
        ]
        if not pending:
            if number is None:
                raise LookupError("no pending approval")
            return texts.nothing_pending
        if number is None and len(pending) > 1:
            items = "\n".join(f"{i}. {a.confirmation.title}" for i, a in enumerate(pending, 1))
            return texts.which_one.format(items=items)
        index = (number or 1) - 1
        if not 0 <= index < len(pending):
            return texts.nothing_pending
        try:
            await runtime.decide(pending[index].tool_call_id, actor, approve=approve, via="whatsapp")
        except ApprovalSettledError:
            return texts.already_decided
        except (ApprovalExpiredError, ApprovalNotFoundError):
            return texts.expired
        except ApprovalForbiddenError:
            return texts.not_yours
        return None
