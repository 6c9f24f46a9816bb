"""``WhatsAppCloudChannel``: WhatsApp through Meta's Cloud API, on the channel kit.

==================================  ===================================================================
route                               what it is
==================================  ===================================================================
``GET /channels/whatsapp/cloud``    Meta's verification handshake: the ``hub.challenge`` echoed as
                                    text when ``hub.verify_token`` matches, else 403
``POST /channels/whatsapp/cloud``   notifications (messages and statuses), signed with
                                    ``X-Hub-Signature-256``
==================================  ===================================================================

A notification is refused before anything else when it is larger than 1 MB (413) or its
signature does not match its exact bytes (403): nothing is read, claimed or recorded. Then it
must be JSON (400). Its messages are claimed once each by their ``wamid`` in the store (a
replay, on any process, is ignored), the answer is 200 at once, and each message is handled in
a task the delivery owns: the sender becomes a ``WhatsAppSender`` and an actor (the same
identity and thread as on Twilio: ``SenderResolver``, ``keyed_thread_namer``), their 24 h
window opens (the sender record of WhatsApp's ``ChannelState``, as on Twilio), and the kit's
``ChatInbound`` redeems a tapped button or starts the turn. Statuses go to ``CloudStatuses``.
Delivery is the kit's ``PushDelivery`` through ``CloudPort``.
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
from aiohttp import web

from gateway import (
    BUTTON_PREFIX,
    Channel,
    ChannelServices,
    ChatInbound,
    ChatTexts,
    GatewayError,
    InboundMessage,
    InboundOptions,
    MediaFetchError,
    MediaSource,
    ProviderMedia,
    PushDelivery,
    PushSendError,
    PushTarget,
    RetryPolicy,
    StaffMember,
    fetch_media,
    one_line,
    read_body,
)
from gateway.events import Attachment
from tools import Actor, UserError

from ._cloud_api import GraphClient
from ._cloud_options import WhatsAppCloudOptions
from ._cloud_parts import CloudPart
from ._cloud_port import CLOUD, CloudPort
from ._cloud_status import CloudStatuses
from ._cloud_webhook import (
    MAX_NOTIFICATION,
    SIGNATURE_HEADER,
    CloudMessage,
    parse_notification,
    verify_signature,
    verify_subscription,
)
from ._identity import (
    SenderResolver,
    SettingsSenderResolver,
    ThreadNamer,
    WhatsAppSender,
    keyed_thread_namer,
    language_for,
    staff_members,
)
from ._options import WhatsAppSenderOptions
from ._outbound import WHATSAPP_CAPABILITIES, DeliveryOptions
from ._state import ChannelState

__all__ = [
    "CLOUD_PATH",
    "WHATSAPP_CLOUD",
    "CloudNotConfiguredError",
    "CloudWebhookRefusedError",
    "WhatsAppCloudChannel",
]

logger = logging.getLogger("channels.whatsapp.cloud")

CLOUD_PATH = "/channels/whatsapp/cloud"


class CloudNotConfiguredError(GatewayError):
    """The channel is present but its credentials are not set (503)."""

    status, code = 503, "whatsapp_cloud_not_configured"


class CloudWebhookRefusedError(GatewayError):
    """A forged or unsigned notification, or a handshake with the wrong verify token (403)."""

    status, code = 403, "forbidden"


class _NotJsonError(GatewayError):
    status, code = 400, "invalid_json"


class WhatsAppCloudChannel(Channel):
    """WhatsApp through the Cloud API on one gateway app: notifications in, deliveries out, approvals.

    Args:
        options: The settings (``WhatsAppCloudOptions()`` reads ``AGORA_WHATSAPP_CLOUD_*``).
        senders: Who the senders are (``WhatsAppSenderOptions()`` reads ``AGORA_WHATSAPP_*``).
        session: An HTTP session for the Graph API (one is made when omitted).
        resolver: Maps a sender to an actor (roles from ``senders`` by default).
        thread_for: Names a sender's thread (``keyed_thread_namer`` of the gateway's secret).
        delivery: Delivery timing, the 24 h window and status resends (WhatsApp's defaults).
        inbound: Limits of inbound messages.
        texts: Sentences by language (the kit's ``CHAT_TEXTS``).
        retry: Retries of one Graph request within a delivery round.
        media: Where received media may be downloaded from (``GRAPH_MEDIA``).
    """

    name = CLOUD
    capabilities = WHATSAPP_CAPABILITIES

    def __init__(
        self,
        options: WhatsAppCloudOptions | None = None,
        *,
        senders: WhatsAppSenderOptions | None = None,
        session: aiohttp.ClientSession | None = None,
        resolver: SenderResolver | None = None,
        thread_for: ThreadNamer | None = None,
        delivery: DeliveryOptions | None = None,
        inbound: InboundOptions | None = None,
        texts: dict[str, ChatTexts] | None = None,
        retry: RetryPolicy | None = None,
        media: MediaSource | None = None,
    ) -> None:
        self.options = options if options is not None else WhatsAppCloudOptions()
        self.media_source = media or GRAPH_MEDIA
        """Where received media may be downloaded from (Meta's media host; tests name loopback)."""
        self.senders = senders if senders is not None else WhatsAppSenderOptions()
        self.disabled_reason = self.options.disabled_reason
        token = self.options.access_token.get_secret_value() if self.options.access_token else ""
        self.client = GraphClient(
            access_token=token,
            phone_number_id=self.options.phone_number_id or "",
            api_version=self.options.api_version,
            graph_base=self.options.graph_base,
            session=session,
        )
        self.resolver: SenderResolver = resolver or SettingsSenderResolver.from_options(self.senders)
        self._thread_for = thread_for
        self.delivery_options = delivery or DeliveryOptions()
        self._inbound, self._texts, self._retry = inbound, texts, retry

    def setup(self, app: web.Application, services: ChannelServices) -> None:
        """Mount ``GET|POST /channels/whatsapp/cloud`` and the channel's start and stop."""
        agent = self.options.agent
        if agent is not None and agent not in services.runtime.agents:
            raise UserError(f"AGORA_WHATSAPP_CLOUD_AGENT names agent {agent!r}, which this gateway does not serve")
        self.services = services
        self.thread_for = self._thread_for or keyed_thread_namer(services.secret)
        prefix = self.options.key_prefix
        self.state = services.state(prefix, ChannelState)
        self.port = CloudPort(
            client=self.client,
            options=self.options,
            state=self.state,
            window=self.delivery_options.window,
            retry=self._retry,
            staff=self.staff_targets,
        )
        self.delivery: PushDelivery[CloudPart] = PushDelivery(
            services, self.port, prefix=prefix, options=self.delivery_options, texts=self._texts, state=self.state
        )
        self.inbound = ChatInbound(services, self.delivery, via=CLOUD, options=self._inbound)
        self.statuses = CloudStatuses(
            state=self.state, delivery=self.delivery, max_resends=self.delivery_options.max_status_resends
        )
        app.router.add_get(CLOUD_PATH, self.verify_handler)
        app.router.add_post(CLOUD_PATH, self.notification_handler)
        app[WHATSAPP_CLOUD] = self
        self.mount_lifecycle(app)

    async def staff_targets(self, role: str) -> list[StaffMember]:
        """The chats of the configured numbers (``AGORA_WHATSAPP_ROLES``) holding ``role``, as on Twilio."""
        return await staff_members(
            self.resolver,
            role,
            thread_for=self.thread_for,
            languages=self.senders.languages,
            extra=lambda sender: {"e164": sender.e164, "wa_id": sender.e164.removeprefix("+")},
        )

    def health(self) -> dict[str, Any]:
        """The channel's state and, when configured, its delivery's counts on this process (once set up)."""
        found = super().health()
        if not self.disabled_reason:
            found["delivery"] = self.delivery.health()
        return found

    async def start(self) -> None:
        """Open the Graph session and start delivering (only when configured)."""
        if self.disabled_reason:
            logger.info("WhatsApp Cloud API channel off: %s", self.disabled_reason)
            return
        await self.client.open()
        self.delivery.start()
        logger.info("WhatsApp Cloud API channel on for phone number id %s", self.options.phone_number_id)

    async def aclose(self) -> None:
        """Stop delivering and close the Graph session this channel made."""
        await self.delivery.aclose()
        await self.client.aclose()

    # -- routes ---------------------------------------------------------------------------------

    def _check_enabled(self) -> None:
        if self.disabled_reason:
            raise CloudNotConfiguredError(f"The WhatsApp Cloud API channel is off: {self.disabled_reason}")

    async def verify_handler(self, request: web.Request) -> web.Response:
        """``GET``: answer Meta's handshake."""
        self._check_enabled()
        token = self.options.verify_token.get_secret_value() if self.options.verify_token else ""
        challenge = verify_subscription(request.query, token)
        if challenge is None:
            raise CloudWebhookRefusedError("Wrong verify token (or not a subscription handshake)")
        return web.Response(text=challenge, content_type="text/plain")

    async def notification_handler(self, request: web.Request) -> web.Response:
        """``POST``: check size and signature, claim each message, answer 200, handle in the background."""
        self._check_enabled()
        body = await read_body(request, MAX_NOTIFICATION)
        secret = self.options.app_secret.get_secret_value().encode() if self.options.app_secret else b""
        if not verify_signature(secret, body, request.headers.get(SIGNATURE_HEADER)):
            raise CloudWebhookRefusedError("Invalid X-Hub-Signature-256")
        try:
            found = parse_notification(body, phone_number_id=self.options.phone_number_id or "")
        except ValueError as exc:
            raise _NotJsonError(f"The notification is not JSON: {exc}") from None
        for reason in found.ignored:
            logger.info("WhatsApp Cloud notification: ignored %s", reason)
        for message in found.messages:
            if not await self.state.claim_message(message.id):
                logger.info("WhatsApp Cloud message %s was already received: ignored", one_line(message.id, 80))
                continue
            self.delivery.spawn(self.handle(message), name=f"agora-wac-inbound-{message.id[-12:]}")
        for status in found.statuses:
            self.delivery.spawn(self.statuses.on_status(status), name=f"agora-wac-status-{status.id[-12:]}")
        return web.Response(status=200)

    # -- one message -----------------------------------------------------------------------------

    async def handle(self, message: CloudMessage) -> None:
        """One claimed message: the sender, their actor and thread, then the kit's inbound handling."""
        async with self.inbound.in_order(message.wa_id):
            await self._handle(message)

    async def _handle(self, message: CloudMessage) -> None:
        try:
            sender = WhatsAppSender.from_webhook(message.wa_id, wa_id=message.wa_id, profile_name=message.profile_name)
        except ValueError:
            logger.info("WhatsApp Cloud message %s from %r: not a number; ignored", message.id, one_line(message.wa_id))
            return
        actor = await self.resolver.resolve(sender)
        language = language_for(sender, self.senders.languages)
        thread_id = self.thread_for(actor, sender) if actor is not None else None
        # Any message opens the 24 h window (Meta's rule), a refused sender's too.
        await self.state.touch_sender(sender.e164, address=sender.address, language=language, thread_id=thread_id)
        extra = {"e164": sender.e164, "wa_id": message.wa_id}
        if actor is None or thread_id is None:
            await self.inbound.refuse(PushTarget(thread_id="", address=sender.address, actor_id="", language=language))
            return
        target = PushTarget(
            thread_id=thread_id,
            address=sender.address,
            actor_id=actor.id,
            language=language,
            extra=extra,
        )
        button = message.button if message.button and message.button.startswith(BUTTON_PREFIX) else None
        redeemed = await self.inbound.handle(
            InboundMessage(
                target=target,
                actor=actor,
                text="" if button else message.text,
                button=button,
                has_media=message.kind == "media",
                media=self._media(message),
                agent=self.options.agent,
            )
        )
        if redeemed is not None and redeemed.reply:
            await self.delivery.reply(target, redeemed.reply)

    def _media(self, message: CloudMessage) -> tuple[ProviderMedia, ...]:
        """An image or document: its URL from Graph, then the bytes, both with the bearer token."""
        media_id = message.media_id
        if not media_id:
            return ()

        async def fetch(actor: Actor, thread_id: str) -> Attachment:
            try:
                url, mime = await self.client.media_url(media_id)
            except PushSendError as exc:
                raise MediaFetchError(f"Graph named no media URL: {exc}") from None
            return await fetch_media(
                self.services.attachments,
                url=url,
                source=self.media_source,
                actor=actor,
                thread_id=thread_id,
                name=message.media_name,
                claimed_mime=message.media_mime or mime,
                headers=self.client.bearer(),
            )

        return (ProviderMedia(fetch=fetch, kind=message.media_mime or "media"),)


GRAPH_MEDIA = MediaSource(hosts=frozenset({"lookaside.fbsbx.com"}))
"""Where Graph's media URLs point (Meta's media host)."""

WHATSAPP_CLOUD = web.AppKey("agora_whatsapp_cloud", WhatsAppCloudChannel)
"""The app's Cloud API channel."""
