"""The Telegram channel: a bot that talks to people over the Telegram Bot API.

Built on aiohttp (already the gateway's HTTP stack) rather than aiogram: the channel needs a
handful of Bot API methods (``sendMessage``, ``sendPhoto``, ``sendDocument``,
``answerCallbackQuery``, ``editMessageText``, ``sendChatAction``, ``setWebhook``, ``getMe``) and
one webhook route. A small typed client over the documented HTTP API (``TelegramApi``) does
that in about 150 lines, and keeps one dispatcher (the gateway's), one session lifecycle (the
app's ``cleanup_ctx``) and one set of models (ours); aiogram would bring a second of each.
"""

from ._api import InputFile, TelegramApi
from ._channel import PREFIX, TELEGRAM, TELEGRAM_MEDIA, WEBHOOK_PATH, TelegramChannel
from ._identity import OptionsUserResolver, ThreadNamer, UserResolver, keyed_thread_namer, language_for
from ._options import TelegramOptions
from ._port import MAX_CAPTION, TELEGRAM_CAPABILITIES, TelegramPart, TelegramPort, chat_markup
from ._updates import CallbackQuery, Chat, Message, MessageEntity, Update, User, addressed_text
from ._webhook import MAX_UPDATE_BYTES, SECRET_HEADER, TelegramWebhookError, WebhookGate

__all__ = [
    "MAX_CAPTION",
    "MAX_UPDATE_BYTES",
    "PREFIX",
    "SECRET_HEADER",
    "TELEGRAM",
    "TELEGRAM_CAPABILITIES",
    "TELEGRAM_MEDIA",
    "WEBHOOK_PATH",
    "CallbackQuery",
    "Chat",
    "InputFile",
    "Message",
    "MessageEntity",
    "OptionsUserResolver",
    "TelegramApi",
    "TelegramChannel",
    "TelegramOptions",
    "TelegramPart",
    "TelegramPort",
    "TelegramWebhookError",
    "ThreadNamer",
    "Update",
    "User",
    "UserResolver",
    "WebhookGate",
    "addressed_text",
    "chat_markup",
    "keyed_thread_namer",
    "language_for",
]
