"""``TelegramPort``: run events as Bot API calls, and sending them.

A part is one Bot API call: ``sendMessage`` (MarkdownV2 text, split at 4096), ``sendPhoto`` /
``sendDocument`` (a rendered component's page, uploaded from the media store, its caption at
most 1024), or ``editMessageText`` (an approval card showing its outcome). An approval is a
card with an inline keyboard: the approve button titled with the tool's confirmation verb,
reject, and "Always" where the decision may be remembered; each button's ``callback_data`` is
``agora:<token>`` (30 bytes of Telegram's 64). The card's ``message_id`` is kept per tool call,
so that when the approval settles (here, on the web, or by expiring) the card is edited to say
so and loses its keyboard. An approval a role
decides goes to the private chats of the configured users holding it (``staff_targets``).

While a run works the chat shows "typing…" (``sendChatAction``, which lasts 5 s on Telegram's
side, re-sent every 4 s until the run stops running; best effort, never retried).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from gateway import (
    ApprovalTokens,
    DeliveredUi,
    PushPort,
    PushSendError,
    PushTarget,
    RetryPolicy,
    StaffMember,
    clip,
    split_telegram,
    to_telegram,
)
from gateway.events import ApprovalRequestedEvent, ApprovalSettledEvent, RunStartedEvent
from tools import UiCapabilities

from ._api import InputFile, TelegramApi

__all__ = ["MAX_CAPTION", "TELEGRAM_CAPABILITIES", "TelegramPart", "TelegramPort"]

logger = logging.getLogger("channels.telegram")

MAX_CAPTION = 1024
"""Characters in a photo's or document's caption."""
TELEGRAM_CAPABILITIES = UiCapabilities(formats=["image", "pdf", "text"])
"""What a Telegram chat shows: components as images or PDFs, else as text."""
CARD_TTL = 8 * 24 * 3600.0
"""Seconds an approval card's message id is kept (Telegram lets a bot edit its messages for 48 h
in groups, longer in private chats; approvals rarely live more than a week)."""
TYPING_EVERY = 4.0
"""Seconds between two ``typing`` actions (Telegram shows one for 5 s)."""

Method = Literal["sendMessage", "sendPhoto", "sendDocument", "editMessageText"]
_MEDIA_METHODS: dict[str, Method] = {"image/png": "sendPhoto", "application/pdf": "sendDocument"}
_OUTCOMES = {
    "en": {"approved": "✅ Approved", "rejected": "❌ Rejected", "expired": "⌛ Expired"},
    "pt-BR": {"approved": "✅ Aprovado", "rejected": "❌ Recusado", "expired": "⌛ Expirado"},
}
"""The line an approval card ends with once decided here (the kit's sentences say "elsewhere")."""


@dataclass(frozen=True, kw_only=True)
class TelegramPart:
    """One Bot API call to make: ``method`` with ``payload`` (and a stored file to upload)."""

    method: Method
    payload: dict[str, Any]
    media_token: str | None = None
    """For ``sendPhoto`` / ``sendDocument``: the media store's token of the page."""
    filename: str = "file"
    mime: str = ""
    card: str | None = None
    """For an approval card: its tool call id (the sent message id is remembered under it)."""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"method": self.method, "payload": self.payload}
        if self.media_token:
            data |= {"media_token": self.media_token, "filename": self.filename, "mime": self.mime}
        if self.card:
            data |= {"card": self.card, **self.extra}
        return data


_CHAT_BOLD = re.compile(r"(?<![*\w])\*(?=\S)(?P<t>[^*\n]+?)(?<=\S)\*(?![*\w])")


def chat_markup(text: str) -> str:
    """One of the kit's sentences (chat markup: ``*bold*``, ``_italic_``) as MarkdownV2."""
    return to_telegram(_CHAT_BOLD.sub(lambda m: f"**{m.group('t')}**", text))


class TelegramPort(PushPort[TelegramPart]):
    """Telegram's half of push delivery."""

    via = "telegram"
    capabilities = TELEGRAM_CAPABILITIES
    shown = PushPort.shown | {"run-started"}

    def __init__(
        self,
        api: TelegramApi,
        *,
        retry: RetryPolicy | None = None,
        typing: bool = True,
        staff: Callable[[str], Awaitable[list[StaffMember]]] | None = None,
    ) -> None:
        self.api = api
        self.retry = retry or RetryPolicy()
        self.typing = typing
        self.staff = staff
        """The staff chats holding a role (the channel's configured users), when set."""

    async def staff_targets(self, role: str) -> list[StaffMember]:
        return await self.staff(role) if self.staff is not None else []

    # -- parts ------------------------------------------------------------------------------------

    def text_parts(self, target: PushTarget, markdown: str) -> list[TelegramPart]:
        return [self._message(target, text) for text in split_telegram(markdown)]

    def line_parts(self, target: PushTarget, text: str) -> list[TelegramPart]:
        return [self._message(target, chat_markup(text))]

    def _message(self, target: PushTarget, text: str, markup: dict[str, Any] | None = None) -> TelegramPart:
        payload: dict[str, Any] = {"chat_id": int(target.address), "text": text, "parse_mode": "MarkdownV2"}
        if markup is not None:
            payload["reply_markup"] = markup
        return TelegramPart(method="sendMessage", payload=payload)

    async def media_parts(self, target: PushTarget, delivered: DeliveredUi) -> list[TelegramPart]:
        parts: list[TelegramPart] = []
        for index, ref in enumerate(delivered.media):
            method = _MEDIA_METHODS.get(ref.mime)
            if method is None:
                continue
            payload: dict[str, Any] = {"chat_id": str(target.address)}
            if index == 0 and delivered.text:
                captions = split_telegram(clip(delivered.text, MAX_CAPTION), MAX_CAPTION)
                if captions:
                    payload |= {"caption": captions[0], "parse_mode": "MarkdownV2"}
            parts.append(
                TelegramPart(
                    method=method,
                    payload=payload,
                    media_token=ref.token,
                    filename=ref.filename,
                    mime=ref.mime,
                )
            )
        return parts or self.text_parts(target, delivered.text or "")

    async def approval_parts(
        self, target: PushTarget, event: ApprovalRequestedEvent, tokens: ApprovalTokens, number: int | None
    ) -> list[Any]:
        texts = self.texts(target)
        body = self._card_body(event)
        footer = texts.instruction_numbered.format(n=number) if number else texts.instruction
        keyboard = {
            "inline_keyboard": [
                [
                    {"text": clip(event.confirmation.verb or texts.approve, 64), "callback_data": tokens.payload(True)},
                    {"text": texts.reject, "callback_data": tokens.payload(False)},
                ]
            ]
        }
        if tokens.always:  # approve, and approve later calls of the tool in this chat's thread
            keyboard["inline_keyboard"][0].append(
                {"text": texts.always, "callback_data": tokens.payload(True, remember=True)}
            )
        part = self._message(target, f"{body}\n{chat_markup(footer)}", keyboard)
        return [TelegramPart(method=part.method, payload=part.payload, card=event.tool_call_id, extra={"body": body})]

    @staticmethod
    def _card_body(event: ApprovalRequestedEvent) -> str:
        """The card without its instruction: the title in bold, then the detail (MarkdownV2)."""
        lines = [chat_markup(f"*{clip(event.confirmation.title, 300)}*")]
        if event.confirmation.detail:
            lines.append(chat_markup(clip(event.confirmation.detail, 1000)))
        return "\n".join(lines)

    # -- hooks ------------------------------------------------------------------------------------

    async def on_run_started(self, event: RunStartedEvent) -> list[Any]:
        if self.typing:
            target = self.target
            self.delivery.spawn(self._type(target, event.run_id), name=f"agora-tg-typing-{event.run_id}")
        return []

    async def on_approval_settled(self, event: ApprovalSettledEvent) -> Any:
        card = await self.delivery.state.get(self._card_key(event.tool_call_id))
        if not isinstance(card, dict):
            return await super().on_approval_settled(event)
        staff = await self.staff_outcome(event)
        if staff is not None:  # the card was a staff member's: it shows the outcome, the requester is told
            return [
                self._edited(card, self._outcomes()[event.status if event.status in self._outcomes() else "rejected"]),
                *staff,
            ]
        texts = self.texts()
        outcomes = _OUTCOMES.get(texts.language, _OUTCOMES["en"])
        status = event.status if event.status in outcomes else "rejected"
        if event.via in (self.via, *self.silent_via) or status == "expired":
            outcome = outcomes[status]
        elif status == "approved":
            outcome = texts.approved_elsewhere.format(via=texts.via(event.via))
        else:
            outcome = texts.rejected_elsewhere.format(via=texts.via(event.via))
        return [self._edited(card, outcome)]

    def _outcomes(self) -> dict[str, str]:
        return _OUTCOMES.get(self.texts().language, _OUTCOMES["en"])

    @staticmethod
    def _edited(card: dict[str, Any], outcome: str) -> TelegramPart:
        """The card edited to end with ``outcome``, without its keyboard."""
        payload = {
            "chat_id": int(card["chat_id"]),
            "message_id": int(card["message_id"]),
            "text": f"{card['text']}\n\n{chat_markup(outcome)}",
            "parse_mode": "MarkdownV2",
            "reply_markup": {"inline_keyboard": []},
        }
        return TelegramPart(method="editMessageText", payload=payload)

    # -- sending ----------------------------------------------------------------------------------

    async def send(self, target: PushTarget, part: TelegramPart) -> str | None:
        if part.media_token is not None:
            stored = await self.services.media_bytes(part.media_token)
            if stored is None:
                raise PushSendError(f"{part.method}: the rendered page expired", retryable=False)
            data, mime, _ = stored
            upload = InputFile(data=data, filename=part.filename, mime=part.mime or mime)
            result = await self.retry.run(lambda: self.api.upload(part.method, upload, part.payload), part.method)
        else:
            result = await self.retry.run(lambda: self.api.call(part.method, part.payload), part.method)
        message_id = result.get("message_id") if isinstance(result, dict) else None
        # Telegram's message ids are integers; anything else is no id (the card is not edited later).
        return str(message_id) if isinstance(message_id, int) and not isinstance(message_id, bool) else None

    async def sent(self, target: PushTarget, part: TelegramPart, message_id: str | None, where: dict[str, Any]) -> None:
        if part.card and message_id:
            card = {"chat_id": part.payload["chat_id"], "message_id": int(message_id), "text": part.extra["body"]}
            await self.delivery.state.set(self._card_key(part.card), card, ttl=CARD_TTL)

    def _card_key(self, tool_call_id: str) -> str:
        return self.delivery.state.key("card", tool_call_id)

    async def _type(self, target: PushTarget, run_id: str) -> None:
        """``typing`` in the chat every few seconds while the run runs (best effort)."""
        runtime = self.services.runtime
        while True:
            try:
                if (await runtime.get_run(run_id)).status != "running":
                    return
                await self.api.call("sendChatAction", {"chat_id": int(target.address), "action": "typing"})
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # typing is decoration: a failure never stops the delivery
                logger.debug("typing failed: %s", exc)  # the line's context names the thread
                return
            await asyncio.sleep(TYPING_EVERY)
