"""``TelegramChannel``: the webhook, the inbound messages and taps, and the push delivery of replies.

``POST /channels/telegram`` takes an update only with our secret token (``WebhookGate``); it is
claimed once by its ``update_id`` in the channel state (a replay, on any process, answers 200
and does nothing), answered 200 at once and handled in the background:

- a **message** addressed to the bot (every one in a private chat; in a group a command naming
  the bot, a mention, or a reply to it) becomes a turn of the chat's thread, through the kit's
  ``ChatInbound`` (typed ``yes`` / ``no``, limits, busy and rate-limit replies);
- a **callback query** (a button tap) is redeemed (single-use, bound to the chat and the user
  it was sent to) and answered with ``answerCallbackQuery``: silently when it decided, else
  "not yours" / "already decided" / "expired";
- anything else (``edited_message``, ``my_chat_member``...) is answered 200 and logged.

Replies go out through ``PushDelivery`` (``TelegramPort``): durable, in order, from whichever
process wrote the events, retried on 429 (after ``retry_after``) and 5xx.
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
from aiohttp import web

from gateway import (
    Channel,
    ChannelServices,
    ChatInbound,
    InboundMessage,
    InboundOptions,
    MediaFetchError,
    MediaSource,
    ProviderMedia,
    PushDelivery,
    PushOptions,
    PushSendError,
    PushTarget,
    RetryPolicy,
    RoleMap,
    StaffMember,
    fetch_media,
)
from gateway.events import Attachment
from tools import Actor, UserError

from ._api import TelegramApi
from ._identity import OptionsUserResolver, ThreadNamer, UserResolver, keyed_thread_namer, language_for
from ._options import TelegramOptions
from ._port import TELEGRAM_CAPABILITIES, TelegramPart, TelegramPort
from ._updates import CallbackQuery, Chat, Message, Update, User, addressed_text
from ._webhook import TelegramWebhookError, WebhookGate

__all__ = ["PREFIX", "TELEGRAM", "TELEGRAM_MEDIA", "WEBHOOK_PATH", "TelegramChannel"]

logger = logging.getLogger("channels.telegram")

PREFIX = "tg"
"""The channel's keys in the store's channel state."""
WEBHOOK_PATH = "/channels/telegram"
ALLOWED_UPDATES = ["message", "callback_query"]
UPDATE_TTL = 2 * 24 * 3600.0
TELEGRAM_MEDIA = MediaSource(hosts=frozenset({"api.telegram.org"}))
"""Where the Bot API serves the files people send (``/file/bot<token>/<file_path>``)."""
"""Seconds an ``update_id`` is remembered: Telegram gives up redelivering an update within a day."""


class TelegramChannel(Channel):
    """A Telegram bot as a channel of the gateway.

    Args:
        options: The bot's configuration (``TelegramOptions()`` reads ``AGORA_TELEGRAM_*``).
        session: An ``aiohttp.ClientSession`` for the Bot API (not closed here).
        push: Delivery timing.
        inbound: Limits of inbound messages.
        retry: How one Bot API call is retried (429 after its ``retry_after``, 5xx, network).
        resolver: Maps users to actors (``OptionsUserResolver`` from the options by default).
        thread_namer: Names a chat's threads (``keyed_thread_namer`` under the gateway's secret).
        typing: Show "typing…" while a run works.
    """

    name = "telegram"
    capabilities = TELEGRAM_CAPABILITIES

    def __init__(
        self,
        options: TelegramOptions | None = None,
        *,
        session: aiohttp.ClientSession | None = None,
        push: PushOptions | None = None,
        inbound: InboundOptions | None = None,
        retry: RetryPolicy | None = None,
        resolver: UserResolver | None = None,
        thread_namer: ThreadNamer | None = None,
        typing: bool = True,
        media: MediaSource | None = None,
    ) -> None:
        self.options = options if options is not None else TelegramOptions()
        self.media_source = media or TELEGRAM_MEDIA
        """Where files people send may be downloaded from (a self-hosted Bot API server: name it)."""
        self.disabled_reason = self.options.disabled_reason
        self._session = session
        self._push_options = push
        self._inbound_options = inbound
        self._retry = retry
        self._typing = typing
        self.resolver: UserResolver = resolver or OptionsUserResolver.from_options(self.options)
        self._thread_namer = thread_namer
        self.bot_username = self.options.bot_username
        self.bot_id = self.options.bot_id
        self._services: ChannelServices | None = None
        self._api: TelegramApi | None = None
        self._delivery: PushDelivery[TelegramPart] | None = None
        self._inbound: ChatInbound | None = None
        self._gate: WebhookGate | None = None

    # -- wiring -----------------------------------------------------------------------------------

    def setup(self, app: web.Application, services: ChannelServices) -> None:
        """Mount ``POST /channels/telegram`` and, when configured, the delivery and its lifecycle."""
        agent = self.options.agent
        if agent is not None and agent not in services.runtime.agents:
            raise UserError(f"AGORA_TELEGRAM_AGENT names agent {agent!r}, which this gateway does not serve")
        app[TELEGRAM] = self
        app.router.add_post(WEBHOOK_PATH, self.webhook, name="telegram")
        self._services = services
        if self.disabled_reason is not None:
            return
        assert self.options.bot_token is not None and self.options.webhook_secret is not None
        self._gate = WebhookGate(self.options.webhook_secret)
        self._api = TelegramApi(self.options.bot_token, api_base=self.options.api_base, session=self._session)
        port = TelegramPort(self._api, retry=self._retry, typing=self._typing, staff=self.staff_targets)
        self._delivery = PushDelivery(services, port, prefix=PREFIX, options=self._push_options)
        self._inbound = ChatInbound(services, self._delivery, via=self.name, options=self._inbound_options)
        self._thread_namer = self._thread_namer or keyed_thread_namer(services.secret)
        self.mount_lifecycle(app)

    async def staff_targets(self, role: str) -> list[StaffMember]:
        """The private chats of the configured users (``AGORA_TELEGRAM_ROLES``) holding ``role``.

        Each user id is resolved by the channel's resolver, so a card is bound to the actor its
        tap resolves to; the bot reaches them once they have started a chat with it. A custom
        resolver that is no ``RoleMap`` names no staff.
        """
        members: list[StaffMember] = []
        roles = self.resolver.roles if isinstance(self.resolver, RoleMap) else {}
        for key, held in roles.items():
            if role not in held or not key.lstrip("-").isdigit():
                continue
            user = User(id=int(key))
            actor = await self.resolver.resolve(user)
            if actor is None or role not in actor.roles:
                continue
            chat = Chat(id=int(key), type="private")
            members.append(StaffMember(target=self._target(chat, user, actor.id), actor=actor))
        return members

    @property
    def api(self) -> TelegramApi:
        """The Bot API client (once set up and configured)."""
        if self._api is None:
            raise RuntimeError("The Telegram channel is not set up, or not configured")
        return self._api

    @property
    def delivery(self) -> PushDelivery[TelegramPart]:
        """The channel's push delivery (once set up and configured)."""
        if self._delivery is None:
            raise RuntimeError("The Telegram channel is not set up, or not configured")
        return self._delivery

    def health(self) -> dict[str, Any]:
        """The channel's state and, when configured, its delivery's counts on this process."""
        found = super().health()
        if self._delivery is not None:
            found["delivery"] = self._delivery.health()
        return found

    async def start(self) -> None:
        """Deliver, learn the bot's name (``getMe``) and register the webhook (``setWebhook``)."""
        self.delivery.start()
        await self._learn_name()
        services = self._services
        assert services is not None and self.options.webhook_secret is not None
        public = services.settings.public_base_url
        if not public:
            logger.info("AGORA_PUBLIC_BASE_URL is not set: the Telegram webhook is not registered")
            return
        try:
            await self.api.call(
                "setWebhook",
                {
                    "url": f"{public}{WEBHOOK_PATH}",
                    "secret_token": self.options.webhook_secret.get_secret_value(),
                    "allowed_updates": ALLOWED_UPDATES,
                },
            )
        except PushSendError as exc:  # the webhook set before keeps working; say so and go on
            logger.error("setWebhook failed: %s", exc)
        else:
            logger.info("Telegram webhook set to %s%s", public, WEBHOOK_PATH)

    async def aclose(self) -> None:
        """Stop delivering and close the Bot API session."""
        if self._delivery is not None:
            await self._delivery.aclose()
        if self._api is not None:
            await self._api.aclose()

    async def _learn_name(self) -> None:
        if self.bot_username:
            return
        try:
            me = await self.api.call("getMe")
        except PushSendError as exc:
            logger.warning("getMe failed (%s): group mentions are not recognised until it works", exc)
            return
        if isinstance(me, dict) and isinstance(me.get("username"), str):
            self.bot_username = me["username"]

    # -- the webhook ------------------------------------------------------------------------------

    async def webhook(self, request: web.Request) -> web.Response:
        """``POST /channels/telegram``: check, claim once, answer 200, handle in the background."""
        if self._gate is None or self._delivery is None:
            raise TelegramWebhookError(503, "telegram_not_configured", self.disabled_reason or "not set up")
        update = await self._gate.read(request)
        if update.kind not in ALLOWED_UPDATES:
            logger.info("Telegram update %d of kind %s: ignored", update.update_id, update.kind)
            return _ok()
        state = self._delivery.state
        if not await state.claim(state.key("update", str(update.update_id)), ttl=UPDATE_TTL):
            logger.info("Telegram update %d was already received: ignored", update.update_id)
            return _ok()
        self._delivery.spawn(self.handle(update), name=f"agora-tg-update-{update.update_id}")
        return _ok()

    async def handle(self, update: Update) -> None:
        """Handle one checked, first-seen update (a person's in arrival order, per chat)."""
        assert self._inbound is not None
        if update.message is not None:
            sender = update.message.from_
            async with self._inbound.in_order(f"{update.message.chat.id}:{sender.id if sender else ''}"):
                await self._message(update.message)
        elif update.callback_query is not None:
            query = update.callback_query
            chat = query.message.chat.id if query.message is not None else ""
            async with self._inbound.in_order(f"{chat}:{query.from_.id}"):
                await self._callback(query)

    # -- inbound ----------------------------------------------------------------------------------

    def _target(self, chat: Chat, user: User, actor_id: str) -> PushTarget:
        assert self._thread_namer is not None
        return PushTarget(
            thread_id=self._thread_namer(chat, user),
            address=str(chat.id),
            actor_id=actor_id,
            language=language_for(user, self.options.languages),
            extra={"chat_type": chat.type},
        )

    async def _message(self, message: Message) -> None:
        user = message.from_
        if user is None or user.is_bot:
            return  # a channel post, an anonymous admin, another bot
        if message.chat.type != "private" and not self.bot_username:
            await self._learn_name()
        text = addressed_text(message, bot_username=self.bot_username, bot_id=self.bot_id)
        if text is None:
            logger.debug("message %d in chat %d is not for the bot", message.message_id, message.chat.id)
            return
        inbound = self._inbound
        assert inbound is not None
        actor = await self.resolver.resolve(user)
        if actor is None:
            await inbound.refuse(self._target(message.chat, user, f"telegram:{user.id}"))
            return
        target = self._target(message.chat, user, actor.id)
        page_context = {"channel": "telegram", "chat_type": message.chat.type}
        await inbound.handle(
            InboundMessage(
                target=target,
                actor=actor,
                text=text,
                has_media=message.has_media,
                media=self._media(message),
                page_context=page_context,
                agent=self.options.agent,
            )
        )

    def _media(self, message: Message) -> tuple[ProviderMedia, ...]:
        """A photo (its largest size) or a document: ``getFile``, then the file's URL, fetched."""
        files: list[tuple[str, str, str | None]] = []  # (file_id, name, claimed type)
        if message.photo:
            largest = message.photo[-1]  # Telegram lists a photo's sizes smallest first
            files.append((str(largest.get("file_id") or ""), "photo.jpg", "image/jpeg"))
        if message.document:
            document = message.document
            name, mime = document.get("file_name"), document.get("mime_type")
            files.append(
                (str(document.get("file_id") or ""), str(name or ""), str(mime) if isinstance(mime, str) else None)
            )
        found: list[ProviderMedia] = []
        for file_id, name, claimed in files:
            if not file_id:
                continue

            async def fetch(
                actor: Actor, thread_id: str, file_id: str = file_id, name: str = name, claimed: str | None = claimed
            ) -> Attachment:
                services = self._services
                assert services is not None  # a message arrives only on a set-up channel
                try:
                    described = await self.api.call("getFile", {"file_id": file_id})
                except PushSendError as exc:
                    raise MediaFetchError(f"getFile failed: {exc}") from None
                path = described.get("file_path") if isinstance(described, dict) else None
                if not isinstance(path, str) or not path:
                    raise MediaFetchError("getFile named no file_path (a file over 20 MB, say)")
                return await fetch_media(
                    services.attachments,
                    url=self.api.file_url(path),
                    source=self.media_source,
                    actor=actor,
                    thread_id=thread_id,
                    name=name,
                    claimed_mime=claimed,
                )

            found.append(ProviderMedia(fetch=fetch, kind="photo" if name == "photo.jpg" else "document"))
        return tuple(found)

    async def _callback(self, query: CallbackQuery) -> None:
        inbound = self._inbound
        assert inbound is not None
        texts = self.delivery.texts_for(language_for(query.from_, self.options.languages))
        reply: str | None = texts.expired
        actor: Actor | None = await self.resolver.resolve(query.from_)
        if actor is None:
            reply = texts.not_yours
        elif query.message is None or not (query.data or "").startswith("agora:"):
            reply = texts.expired  # a card too old for Telegram to send, or a button not ours
        else:
            target = self._target(query.message.chat, query.from_, actor.id)
            redeemed = await inbound.handle(InboundMessage(target=target, actor=actor, button=query.data))
            reply = texts.failed if redeemed is None else redeemed.reply
        await self._answer(query, reply)

    async def _answer(self, query: CallbackQuery, text: str | None) -> None:
        payload: dict[str, Any] = {"callback_query_id": query.id}
        if text:
            payload["text"] = text.replace("*", "")  # a toast shows plain text
        try:
            await self.api.call("answerCallbackQuery", payload)
        except PushSendError as exc:  # the spinner stops by itself after a while
            logger.warning("answerCallbackQuery failed: %s", exc)


def _ok() -> web.Response:
    return web.json_response({})


TELEGRAM = web.AppKey("agora_telegram", TelegramChannel)
"""The app's Telegram channel."""
