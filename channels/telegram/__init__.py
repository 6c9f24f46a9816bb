"""The Telegram channel: a bot that talks to people over the Telegram Bot API.

Built on aiohttp (already the gateway's HTTP stack) rather than aiogram: the channel needs a
handful of Bot API methods (``sendMessage``, ``sendPhoto``, ``sendDocument``,
``answerCallbackQuery``, ``editMessageText``, ``sendChatAction``, ``setWebhook``, ``getMe``) and
one webhook route. A small typed client over the documented HTTP API (``TelegramApi``) does
that in about 150 lines, and keeps one dispatcher (the gateway's), one session lifecycle (the
app's ``cleanup_ctx``) and one set of models (ours); aiogram would bring a second of each.
"""

from ._api import InputFile, TelegramApi, TelegramApiError
from ._options import TelegramOptions
from ._updates import CallbackQuery, Chat, Message, MessageEntity, Update, User, addressed_text
from ._webhook import MAX_UPDATE_BYTES, SECRET_HEADER, TelegramWebhookError, WebhookGate

__all__ = [
    "MAX_UPDATE_BYTES",
    "SECRET_HEADER",
    "CallbackQuery",
    "Chat",
    "InputFile",
    "Message",
    "MessageEntity",
    "TelegramApi",
    "TelegramApiError",
    "TelegramOptions",
    "TelegramWebhookError",
    "Update",
    "User",
    "WebhookGate",
    "addressed_text",
]
