"""The WhatsApp channel's sentences: the shared ``ChatTexts`` (en, pt-BR), worded for phone numbers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gateway import CHAT_TEXTS, ChatTexts, parse_decision, texts_for

__all__ = ["TEXTS", "WhatsAppTexts", "parse_decision", "texts_for"]

WhatsAppTexts = ChatTexts
"""The shared sentences (``gateway.ChatTexts``), under the name this channel always used."""

TEXTS: Mapping[str, ChatTexts] = {
    "en": replace(CHAT_TEXTS["en"], unknown_sender="Sorry, this number is not set up to talk to the assistant."),
    "pt-BR": replace(
        CHAT_TEXTS["pt-BR"],
        unknown_sender="Desculpe, este número não está habilitado para falar com o assistente.",
    ),
}
"""The built-in tables, by language tag."""
