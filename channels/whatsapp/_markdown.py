"""WhatsApp's message length; the Markdown conversion itself is shared (``gateway.to_whatsapp``)."""

from __future__ import annotations

from gateway import split_message as _split
from gateway import to_whatsapp

__all__ = ["MAX_BODY", "split_message", "to_whatsapp"]

MAX_BODY = 1600
"""Characters in one Twilio message body."""


def split_message(text: str, limit: int = MAX_BODY) -> list[str]:
    """Split ``text`` into bodies of at most ``limit`` characters (``gateway.split_message``)."""
    return _split(text, limit)
