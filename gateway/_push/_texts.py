"""The fixed sentences of the text channels, in English and Brazilian Portuguese, and typed decisions.

Everything the gateway itself says on a text channel (button labels, instructions, refusals,
errors) comes from a ``ChatTexts`` chosen per person. They are written in chat markup
(``*bold*``, ``_italic_``), which WhatsApp and Telegram both read (each port escapes the rest).
What the agent says (its replies, the tools' narration and confirmation titles) comes from the
run and is not translated here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .._quotas import EXCEEDED_TEXTS, used_percent

__all__ = ["CHAT_TEXTS", "ChatTexts", "parse_always", "parse_cancel", "parse_decision", "texts_for"]


@dataclass(frozen=True, kw_only=True)
class ChatTexts:
    """One language's sentences. Fields with ``{placeholders}`` are filled with ``str.format``."""

    language: str
    """A BCP 47 tag (``en``, ``pt-BR``); also the Content API language of approval buttons."""
    approve: str = "Approve"
    """The approve button when the tool's confirmation verb is empty."""
    reject: str = "Reject"
    """The reject button."""
    instruction: str = "Tap a button, or reply *yes* or *no*."
    """Below an approval request."""
    instruction_numbered: str = "Reply *yes {n}* or *no {n}*."
    """Below an approval request when several wait."""
    which_one: str = "Several approvals are waiting. Reply *yes 1*, *no 2*…\n{items}"
    """A bare yes/no when several approvals wait; ``{items}`` lists them numbered."""
    approved_elsewhere: str = "Approved ({via})."
    rejected_elsewhere: str = "Rejected ({via})."
    expired: str = "That approval has expired."
    expired_named: str = "The approval “{title}” has expired."
    already_decided: str = "That was already decided."
    nothing_pending: str = "Nothing is waiting for your answer."
    not_yours: str = "That button is not for you."
    unknown_sender: str = "Sorry, you are not set up to talk to the assistant."
    media_unsupported: str = "I can only read text messages for now."
    media_type_refused: str = "I can't read that kind of file: please send a photo or a PDF."
    """A file of a type outside ``AGORA_ATTACHMENT_TYPES`` (or not what it claims to be)."""
    media_too_large: str = "That file is too large: please send one under {limit}."
    """A file over ``AGORA_ATTACHMENT_MAX_BYTES``; ``{limit}`` reads like ``10 MB``."""
    media_unreachable: str = "I couldn't download that file: please send it again."
    too_long: str = "That message is too long: please keep it under {limit} characters."
    rate_limited: str = "You are sending messages too fast: try again in {seconds} seconds."
    quota_day: str = EXCEEDED_TEXTS["day"]
    """The actor's daily token budget (``Quota.day``) is used up: nothing more runs today (UTC)."""
    quota_month: str = EXCEEDED_TEXTS["month"]
    """The actor's monthly token budget (``Quota.month``) is used up."""
    quota_warning: str = "Heads-up: you have used {percent}% of your {period} allowance of the assistant."
    """A ``quota-warning``: ``{percent}`` of the budget used; ``{period}`` is ``period_day`` or ``period_month``."""
    period_day: str = "daily"
    period_month: str = "monthly"
    busy: str = "I'm still working on your previous message: one moment, then try again."
    queue_full: str = "Many of your messages are still waiting: let me answer them before you send more."
    waits_for_approval: str = "Got it: I'll answer this once the approval below is decided."
    """A message queued behind a run that waits for the sender's decision (the buttons follow)."""
    waits_for_someone: str = "Got it: I'll answer this once the pending approval is decided."
    """A message queued behind a run that waits for someone else's decision."""
    cancelled: str = "Stopped."
    """A typed ``cancel`` stopped the running (or waiting) run."""
    failed: str = "Sorry, something went wrong. Please try again."
    input_refused: str = "Sorry, I can't help with that message."
    """A guard refused the person's message (``input_refused``) and gave no message of its own."""
    output_refused: str = "Sorry, I can't share that answer."
    """A guard refused the agent's answer (``output_refused``) and gave no message of its own."""
    waiting_for_staff: str = "Waiting for a person at {brand} to approve: {title}"
    """To the requester, when a role decides (the buttons went to its people)."""
    staff_approved: str = "A person at {brand} approved: {title}"
    staff_rejected: str = "A person at {brand} declined: {title}"
    asked_by: str = "Asked by {requester} ({channel})."
    """Below the detail of an approval card on a staff member's chat."""
    always: str = "Always"
    """The third button: approve, and approve later calls of the same tool in the thread."""
    remember_refused: str = "That cannot be remembered: each one needs a person's decision. Reply *yes* or *no*."
    """A typed "yes always" where the policy forbids remembering (four eyes)."""
    via_names: Mapping[str, str] | None = None
    """How a decision's ``via`` reads (``web`` -> ``on the web``); unknown ones are shown as is."""

    def quota_exceeded(self, period: str | None) -> str:
        """What a person is told when a budget is used up (``period``: ``day`` or ``month``)."""
        return self.quota_month if period == "month" else self.quota_day

    def quota_near(self, period: str, used: int, limit: int) -> str:
        """A ``quota-warning`` in these words."""
        name = self.period_month if period == "month" else self.period_day
        return self.quota_warning.format(percent=used_percent(used, limit), period=name)

    def via(self, via: str | None) -> str:
        """``via`` as people read it."""
        names = self.via_names or {}
        return names.get(via or "", via or "?")


EN = ChatTexts(language="en", via_names={"web": "on the web", "api": "through the API", "ag-ui": "in the app"})

PT_BR = ChatTexts(
    language="pt-BR",
    approve="Aprovar",
    reject="Recusar",
    instruction="Toque num botão, ou responda *sim* ou *não*.",
    instruction_numbered="Responda *sim {n}* ou *não {n}*.",
    which_one="Há várias aprovações pendentes. Responda *sim 1*, *não 2*…\n{items}",
    approved_elsewhere="Aprovado ({via}).",
    rejected_elsewhere="Recusado ({via}).",
    expired="Essa aprovação expirou.",
    expired_named="A aprovação “{title}” expirou.",
    already_decided="Isso já foi decidido.",
    nothing_pending="Nada está aguardando a sua resposta.",
    not_yours="Esse botão não é para você.",
    unknown_sender="Desculpe, você não está habilitado para falar com o assistente.",
    media_unsupported="Por enquanto só consigo ler mensagens de texto.",
    media_type_refused="Não consigo ler esse tipo de arquivo: envie uma foto ou um PDF.",
    media_too_large="Esse arquivo é grande demais: envie um com menos de {limit}.",
    media_unreachable="Não consegui baixar esse arquivo: envie de novo, por favor.",
    too_long="Essa mensagem é longa demais: envie no máximo {limit} caracteres.",
    rate_limited="Você está enviando mensagens rápido demais: tente de novo em {seconds} segundos.",
    quota_day="Você já usou a cota de hoje do assistente. Volte amanhã, por favor.",
    quota_month="Você já usou a cota deste mês do assistente. Volte no próximo mês, por favor.",
    quota_warning="Atenção: você já usou {percent}% da sua cota {period} do assistente.",
    period_day="diária",
    period_month="mensal",
    busy="Ainda estou trabalhando na sua mensagem anterior: um momento, depois tente de novo.",
    queue_full="Várias mensagens suas ainda estão esperando: deixe-me respondê-las antes de enviar mais.",
    waits_for_approval="Entendido: respondo assim que a aprovação abaixo for decidida.",
    waits_for_someone="Entendido: respondo assim que a aprovação pendente for decidida.",
    cancelled="Parei.",
    failed="Desculpe, algo deu errado. Tente de novo.",
    input_refused="Desculpe, não posso ajudar com essa mensagem.",
    output_refused="Desculpe, não posso compartilhar essa resposta.",
    waiting_for_staff="Aguardando uma pessoa da {brand} aprovar: {title}",
    staff_approved="Uma pessoa da {brand} aprovou: {title}",
    staff_rejected="Uma pessoa da {brand} recusou: {title}",
    asked_by="Pedido por {requester} ({channel}).",
    always="Sempre",
    remember_refused="Isso não pode ser lembrado: cada um precisa da decisão de uma pessoa. Responda *sim* ou *não*.",
    via_names={"web": "na web", "api": "pela API", "ag-ui": "no aplicativo"},
)

CHAT_TEXTS: Mapping[str, ChatTexts] = {"en": EN, "pt-BR": PT_BR}
"""The built-in tables, by language tag."""


def texts_for(language: str | None, table: Mapping[str, ChatTexts] = CHAT_TEXTS) -> ChatTexts:
    """The table for ``language``: an exact tag, else the same primary language, else English.

    ``pt``, ``pt-PT`` and ``pt_BR`` all get ``pt-BR`` from the built-in tables.
    """
    fallback = table.get("en") or next(iter(table.values()))
    if not language:
        return fallback
    tag = language.replace("_", "-")
    for key, texts in table.items():
        if key.lower() == tag.lower():
            return texts
    primary = tag.split("-")[0].lower()
    for key, texts in table.items():
        if key.split("-")[0].lower() == primary:
            return texts
    return fallback


_YES = ("yes", "y", "yep", "ok", "okay", "approve", "approved", "confirm", "sim", "s", "aprovar", "aprovo", "confirmar")
_NO = ("no", "n", "nope", "reject", "deny", "não", "nao", "recusar", "recuso")
# "cancel" is not a "no": it stops the run (parse_cancel), whatever waits in it.
_CANCEL = re.compile(r"^\s*(?:cancel|cancelar)\s*[.!]*\s*$", re.IGNORECASE)
_DECISION = re.compile(
    r"^\s*(?P<word>" + "|".join(sorted(map(re.escape, _YES + _NO), key=len, reverse=True)) + r")"
    r"(?:\s*#?\s*(?P<n>\d{1,3}))?\s*[.!]*\s*$",
    re.IGNORECASE,
)


def parse_decision(text: str) -> tuple[bool, int | None] | None:
    """Read a typed decision: ``yes`` -> ``(True, None)``, ``não 2`` -> ``(False, 2)``; else ``None``.

    Words of every built-in language are understood whatever the sender's language.
    """
    match = _DECISION.match(text)
    if match is None:
        return None
    word = match.group("word").lower()
    number = match.group("n")
    return word in _YES, int(number) if number else None


def parse_cancel(text: str) -> bool:
    """Whether ``text`` is a typed ``cancel`` (or ``cancelar``): stop the thread's active run."""
    return _CANCEL.match(text) is not None


_ALWAYS = re.compile(
    r"^\s*(?:(?:yes|sim|s|y|ok|approve|aprovar)\s+)?(?P<word>always|sempre)"
    r"(?:\s*#?\s*(?P<n>\d{1,3}))?\s*[.!]*\s*$",
    re.IGNORECASE,
)


def parse_always(text: str) -> tuple[bool, int | None] | None:
    """Read a typed "approve and remember": ``yes always`` -> ``(True, None)``, ``sempre 2`` -> ``(True, 2)``.

    ``None`` when the text is no such answer. As ``parse_decision``, whatever the sender's language.
    """
    match = _ALWAYS.match(text)
    if match is None:
        return None
    number = match.group("n")
    return True, int(number) if number else None
