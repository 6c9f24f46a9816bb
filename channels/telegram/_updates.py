"""What Telegram posts to the webhook: ``Update``, ``Message``, ``CallbackQuery``, and who it addresses.

Only the fields the channel reads are modelled. Telegram adds fields to its objects in new Bot
API versions, so these models ignore unknown keys (``extra="ignore"``) rather than forbid them,
and an update of a kind the channel does not take (``edited_message``, ``my_chat_member``...)
parses with ``kind`` naming it, to be answered 200 and logged.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CallbackQuery", "Chat", "Message", "MessageEntity", "Update", "User", "addressed_text"]

_MODEL = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class User(BaseModel):
    """A Telegram user or bot."""

    model_config = _MODEL

    id: int
    is_bot: bool = False
    first_name: str = ""
    username: str | None = None
    language_code: str | None = None
    """The IETF tag of the user's app language (``pt-br``, ``en``), when Telegram sends it."""


class Chat(BaseModel):
    """The chat a message belongs to."""

    model_config = _MODEL

    id: int
    type: str
    """``private``, ``group``, ``supergroup`` or ``channel``."""
    title: str | None = None


class MessageEntity(BaseModel):
    """A span of a message's text (``bot_command``, ``mention``, ...); offsets in UTF-16 units."""

    model_config = _MODEL

    type: str
    offset: int
    length: int


class Message(BaseModel):
    """A message (only the fields the channel reads)."""

    model_config = _MODEL

    message_id: int
    chat: Chat
    from_: User | None = Field(default=None, alias="from")
    text: str | None = None
    caption: str | None = None
    entities: list[MessageEntity] = Field(default_factory=list)
    caption_entities: list[MessageEntity] = Field(default_factory=list)
    """The entities of ``caption`` (a photo's or document's text marks its mentions here)."""
    reply_to_message: Message | None = None
    photo: list[dict[str, object]] | None = None
    document: dict[str, object] | None = None
    voice: dict[str, object] | None = None
    video: dict[str, object] | None = None
    audio: dict[str, object] | None = None
    sticker: dict[str, object] | None = None

    @property
    def has_media(self) -> bool:
        """Whether the message carries a file the channel does not read (a photo, a voice note...)."""
        return any(x is not None for x in (self.photo, self.document, self.voice, self.video, self.audio, self.sticker))


class CallbackQuery(BaseModel):
    """A tap on an inline keyboard button."""

    model_config = _MODEL

    id: str
    from_: User = Field(alias="from")
    message: Message | None = None
    """The message whose button was tapped (absent when it is too old for Telegram to send)."""
    data: str | None = None
    """The button's ``callback_data`` (1-64 bytes)."""


class Update(BaseModel):
    """One webhook body. ``kind`` names what it carries; only ``message`` and ``callback_query`` are served."""

    model_config = ConfigDict(extra="allow", frozen=True)

    update_id: int
    message: Message | None = None
    callback_query: CallbackQuery | None = None

    @property
    def kind(self) -> str:
        """``message``, ``callback_query``, or the key of another kind (``edited_message``...)."""
        if self.message is not None:
            return "message"
        if self.callback_query is not None:
            return "callback_query"
        return next(iter(self.model_extra or {}), "empty")


def _utf16_slice(text: str, offset: int, length: int) -> tuple[int, int]:
    """The code-point span of a UTF-16 ``offset`` / ``length`` in ``text``."""
    units = 0
    start = end = len(text)
    for index, char in enumerate(text):
        if units == offset:
            start = index
        if units == offset + length:
            end = index
            break
        units += 2 if ord(char) > 0xFFFF else 1
    return start, end


def addressed_text(message: Message, *, bot_username: str | None, bot_id: int | None) -> str | None:
    """The text of ``message`` if it is for the bot, with the bot's name taken out; else ``None``.

    In a private chat every message is for the bot. In a group only: a command naming the bot
    (``/status@agora_bot``), a mention of it (``@agora_bot``), or a reply to one of its messages.
    A channel post is never for the bot.
    """
    text = message.text if message.text is not None else message.caption
    if message.chat.type == "private":
        return text or ""
    if message.chat.type not in ("group", "supergroup") or text is None:
        return None
    replied = message.reply_to_message
    if replied is not None and replied.from_ is not None and bot_id is not None and replied.from_.id == bot_id:
        return text
    if not bot_username:
        return None
    name = bot_username.lower()
    entities = message.entities if message.text is not None else message.caption_entities
    for entity in entities:
        start, end = _utf16_slice(text, entity.offset, entity.length)
        span = text[start:end]
        if entity.type == "mention" and span.lower() == f"@{name}":
            return " ".join(f"{text[:start]}{text[end:]}".split())
        if entity.type == "bot_command" and span.lower().endswith(f"@{name}"):
            return f"{text[:start]}{span[: -len(name) - 1]}{text[end:]}".strip()
    # Entities are what Telegram marks; a plain-text mention (a client that sent none) counts too.
    mention = re.compile(rf"(?<![\w@])@{re.escape(name)}\b", re.IGNORECASE)
    if mention.search(text):
        return " ".join(mention.sub("", text).split())
    return None
