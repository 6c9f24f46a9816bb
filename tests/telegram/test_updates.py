"""Parsing updates and telling which group messages are for the bot."""

from __future__ import annotations

from channels.telegram import Update, addressed_text

from .botapi import BOT_ID, BOT_USERNAME
from .updates import GROUP_ID, bot_message, callback, command, mention, message


def text_of(body: dict[str, object]) -> str | None:
    update = Update.model_validate(body)
    assert update.message is not None
    return addressed_text(update.message, bot_username=BOT_USERNAME, bot_id=BOT_ID)


def test_kinds() -> None:
    assert Update.model_validate(message("hi")).kind == "message"
    assert Update.model_validate(callback("agora:x")).kind == "callback_query"
    edited = {"update_id": 1, "edited_message": message("x")["message"]}
    assert Update.model_validate(edited).kind == "edited_message"
    assert Update.model_validate({"update_id": 2}).kind == "empty"


def test_unknown_fields_are_ignored() -> None:
    body = message("hi", link_preview_options={"is_disabled": True})
    body["brand_new_field"] = {"x": 1}
    update = Update.model_validate(body)
    assert update.message is not None and update.message.text == "hi"


def test_private_messages_are_all_for_the_bot() -> None:
    assert text_of(message("refund order 1042")) == "refund order 1042"


def test_group_messages_need_a_command_a_mention_or_a_reply() -> None:
    assert text_of(message("refund order 1042", chat_id=GROUP_ID)) is None
    assert text_of(command("refund", "order 1042", chat_id=GROUP_ID)) == "/refund order 1042"
    assert text_of(command("refund", "order 1042", bot="other_bot", chat_id=GROUP_ID)) is None
    assert text_of(mention("refund order 1042", chat_id=GROUP_ID)) == "refund order 1042"
    assert text_of(mention("hi", bot="other_bot", chat_id=GROUP_ID)) is None
    assert text_of(message("yes", chat_id=GROUP_ID, reply_to=bot_message(GROUP_ID))) == "yes"
    someone = bot_message(GROUP_ID) | {"from": {"id": 77, "is_bot": False, "first_name": "Bob"}}
    assert text_of(message("yes", chat_id=GROUP_ID, reply_to=someone)) is None


def test_a_mention_after_astral_characters_uses_utf16_offsets() -> None:
    head = f"😀 @{BOT_USERNAME}"
    body = message(f"{head} hi", chat_id=GROUP_ID, entities=[{"type": "mention", "offset": 3, "length": 15}])
    assert text_of(body) == "😀 hi"


def test_a_plain_text_mention_counts_and_a_longer_name_does_not() -> None:
    assert text_of(message(f"hey @{BOT_USERNAME.upper()} status", chat_id=GROUP_ID)) == "hey status"
    assert text_of(message(f"hey @{BOT_USERNAME}x status", chat_id=GROUP_ID)) is None


def test_channel_posts_are_not_for_the_bot() -> None:
    body = message("x")
    body["message"]["chat"] = {"id": -1009, "type": "channel", "title": "News"}
    assert text_of(body) is None
