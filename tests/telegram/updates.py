"""Updates as Telegram posts them (the fields of the Bot API's ``Update`` / ``Message`` / ``CallbackQuery``)."""

from __future__ import annotations

import itertools
from typing import Any

from .botapi import BOT_ID, BOT_USERNAME

_update_ids = itertools.count(10_000)
_message_ids = itertools.count(1)

ALICE_ID = 5550001
BRUNA_ID = 5550002
GROUP_ID = -100123456


def user(user_id: int = ALICE_ID, *, language: str | None = "en", first_name: str = "Alice") -> dict[str, Any]:
    found: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
    if language:
        found["language_code"] = language
    return found


def chat(chat_id: int) -> dict[str, Any]:
    if chat_id < 0:
        return {"id": chat_id, "type": "supergroup", "title": "Ops"}
    return {"id": chat_id, "type": "private", "first_name": "Alice"}


def message(
    text: str,
    *,
    sender: int = ALICE_ID,
    chat_id: int | None = None,
    language: str | None = "en",
    entities: list[dict[str, Any]] | None = None,
    reply_to: dict[str, Any] | None = None,
    update_id: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "message_id": next(_message_ids),
        "from": user(sender, language=language),
        "chat": chat(chat_id if chat_id is not None else sender),
        "date": 1_700_000_000,
        "text": text,
        **extra,
    }
    if entities:
        body["entities"] = entities
    if reply_to:
        body["reply_to_message"] = reply_to
    return {"update_id": update_id if update_id is not None else next(_update_ids), "message": body}


def command(name: str, rest: str = "", *, bot: str = BOT_USERNAME, **kw: Any) -> dict[str, Any]:
    """``/name@bot rest`` with its ``bot_command`` entity."""
    head = f"/{name}@{bot}"
    text = f"{head} {rest}".strip()
    return message(text, entities=[{"type": "bot_command", "offset": 0, "length": len(head)}], **kw)


def mention(text: str, *, bot: str = BOT_USERNAME, **kw: Any) -> dict[str, Any]:
    """``@bot text`` with its ``mention`` entity."""
    head = f"@{bot}"
    return message(f"{head} {text}", entities=[{"type": "mention", "offset": 0, "length": len(head)}], **kw)


def bot_message(chat_id: int, message_id: int = 1, text: str = "…") -> dict[str, Any]:
    return {
        "message_id": message_id,
        "from": {"id": BOT_ID, "is_bot": True, "first_name": "Agora", "username": BOT_USERNAME},
        "chat": chat(chat_id),
        "date": 1_700_000_000,
        "text": text,
    }


def callback(
    data: str, *, sender: int = ALICE_ID, chat_id: int | None = None, message_id: int = 1, update_id: int | None = None
) -> dict[str, Any]:
    where = chat_id if chat_id is not None else sender
    return {
        "update_id": update_id if update_id is not None else next(_update_ids),
        "callback_query": {
            "id": f"cb-{next(_update_ids)}",
            "from": user(sender),
            "message": bot_message(where, message_id),
            "chat_instance": "ci-1",
            "data": data,
        },
    }
