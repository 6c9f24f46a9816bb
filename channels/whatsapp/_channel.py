"""``WhatsAppChannel``: the channel's parts wired together, and ``setup`` to mount it on an app."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from gateway import SERVICES, GatewayServices, Settings

from ._approvals import ApprovalButtons
from ._identity import SenderResolver, SettingsSenderResolver, ThreadNamer, keyed_thread_namer
from ._inbound import InboundHandler, InboundOptions
from ._outbound import DeliveryOptions, WhatsAppDelivery
from ._sender import JsonAsyncTwilioHttpClient, RetryPolicy, TwilioSender
from ._state import ChannelState
from ._status import StatusCallbacks
from ._texts import TEXTS, WhatsAppTexts, texts_for
from ._webhook import WebhookVerifier, inbound_handler, status_handler

__all__ = ["WHATSAPP", "WhatsAppChannel", "WhatsAppOptions", "setup"]

logger = logging.getLogger("channels.whatsapp")

INBOUND_PATH = "/channels/whatsapp"
STATUS_PATH = "/channels/whatsapp/status"


@dataclass(frozen=True, kw_only=True)
class WhatsAppOptions:
    """Tuning of the channel (the defaults suit production; tests shrink the delays)."""

    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """Retries of one Twilio request (429, 5xx, unreachable)."""
    delivery: DeliveryOptions = field(default_factory=DeliveryOptions)
    inbound: InboundOptions = field(default_factory=InboundOptions)
    key_prefix: str = "wa"
    """Prefix of the channel's keys in the store's channel state."""


def _missing(settings: Settings, twilio_client: Any) -> str | None:
    """Why the channel cannot run with these settings, or ``None``."""
    if not (settings.twilio_auth_token or settings.whatsapp_shared_key):
        return "set AGORA_TWILIO_AUTH_TOKEN (or AGORA_WHATSAPP_SHARED_KEY) to check Twilio's signatures"
    if not (settings.whatsapp_from or settings.whatsapp_messaging_service_sid):
        return "set AGORA_WHATSAPP_FROM (whatsapp:+E164) or AGORA_WHATSAPP_MESSAGING_SERVICE_SID"
    if twilio_client is None and not (settings.twilio_account_sid and settings.twilio_auth_token):
        return "set AGORA_TWILIO_ACCOUNT_SID and AGORA_TWILIO_AUTH_TOKEN to send messages"
    return None


class WhatsAppChannel:
    """WhatsApp through Twilio on one gateway app: webhooks in, deliveries out, approvals.

    Build it with ``setup(app)``; it starts and stops with the app. Without the Twilio settings
    it stays off: its routes answer 503 and say which setting is missing.
    """

    def __init__(
        self,
        services: GatewayServices,
        *,
        twilio_client: Any = None,
        resolver: SenderResolver | None = None,
        thread_for: ThreadNamer | None = None,
        texts: Mapping[str, WhatsAppTexts] | None = None,
        options: WhatsAppOptions | None = None,
    ) -> None:
        settings = services.settings
        self.services = services
        self.options = options or WhatsAppOptions()
        self.disabled_reason = _missing(settings, twilio_client)
        self.state = ChannelState(services.runtime.store, self.options.key_prefix)
        self.verifier = WebhookVerifier(
            auth_token=settings.twilio_auth_token.get_secret_value() if settings.twilio_auth_token else None,
            shared_key=settings.whatsapp_shared_key.get_secret_value() if settings.whatsapp_shared_key else None,
            public_base_url=settings.public_base_url,
            trust_forwarded=settings.trust_forwarded,
        )
        self._client = twilio_client
        self._owned_http: Any = None
        self._started = False
        self.resolver: SenderResolver = resolver or SettingsSenderResolver.from_settings(settings)
        self.thread_for: ThreadNamer = thread_for or keyed_thread_namer(services.secret)
        self.texts: Mapping[str, WhatsAppTexts] = dict(texts or TEXTS)
        self._build()

    def _build(self) -> None:
        settings = self.services.settings
        table = dict(self.texts)
        self.texts_for: Callable[[str | None], WhatsAppTexts] = lambda language: texts_for(language, table)
        self.sender = TwilioSender(
            self._client,
            from_=settings.whatsapp_from,
            messaging_service_sid=settings.whatsapp_messaging_service_sid,
            status_callback=f"{settings.public_base_url}{STATUS_PATH}" if settings.public_base_url else None,
            retry=self.options.retry,
        )
        self.buttons = ApprovalButtons(self.state, self.sender, template_sid=settings.whatsapp_approval_template_sid)
        self.delivery = WhatsAppDelivery(
            services=self.services,
            state=self.state,
            sender=self.sender,
            buttons=self.buttons,
            texts_for=self.texts_for,
            options=self.options.delivery,
        )
        self.status = StatusCallbacks(
            state=self.state,
            sender=self.sender,
            delivery=self.delivery,
            template_sid=settings.whatsapp_approval_template_sid,
            options=self.options.delivery,
        )
        self.inbound = InboundHandler(
            services=self.services,
            state=self.state,
            delivery=self.delivery,
            buttons=self.buttons,
            resolver=self.resolver,
            thread_for=self.thread_for,
            texts_for=self.texts_for,
            languages=settings.whatsapp_languages,
            options=self.options.inbound,
        )

    def configure(
        self,
        *,
        resolver: SenderResolver | None = None,
        thread_for: ThreadNamer | None = None,
        texts: Mapping[str, WhatsAppTexts] | None = None,
        options: WhatsAppOptions | None = None,
    ) -> None:
        """Replace the resolver, thread namer, texts or options of an app's channel before it starts.

        For apps built by ``create_app``, which mounts the channel with its defaults.

        Raises:
            RuntimeError: The channel already started.
        """
        if self._started:
            raise RuntimeError("Cannot configure a WhatsApp channel that already started")
        if options is not None:
            self.options = options
            self.state = ChannelState(self.services.runtime.store, options.key_prefix)
        self.resolver = resolver or self.resolver
        self.thread_for = thread_for or self.thread_for
        self.texts = dict(texts or self.texts)
        self._build()

    @property
    def enabled(self) -> bool:
        """Whether the channel runs (configured and started)."""
        return self.disabled_reason is None and self._started

    async def start(self) -> None:
        """Open the Twilio HTTP client (unless one was given) and start delivering."""
        if self.disabled_reason is not None:
            logger.info("WhatsApp channel off: %s", self.disabled_reason)
            return
        if self._client is None:
            from twilio.rest import Client

            settings = self.services.settings
            self._owned_http = JsonAsyncTwilioHttpClient(timeout=30.0)
            token = settings.twilio_auth_token.get_secret_value() if settings.twilio_auth_token else None
            self._client = Client(settings.twilio_account_sid, token, http_client=self._owned_http)
        self.sender.client = self._client
        self.services.runtime.observers.append(self.delivery)
        self._started = True
        logger.info("WhatsApp channel on at %s", self.verifier.public_base_url or "(the request's own URL)")
        if not self.services.settings.public_base_url:
            logger.warning(
                "AGORA_PUBLIC_BASE_URL is not set: Twilio cannot fetch images and PDFs from %s, and no "
                "status callbacks are asked for. Set it to the URL Twilio reaches this gateway at.",
                self.services.settings.base_url(),
            )

    async def aclose(self) -> None:
        """Stop delivering and close what ``start`` opened."""
        if not self._started:
            return
        self._started = False
        observers = self.services.runtime.observers
        if self.delivery in observers:
            observers.remove(self.delivery)
        await self.delivery.aclose()
        if self._owned_http is not None:
            await self._owned_http.close()
            self._owned_http = None


WHATSAPP = web.AppKey("agora_whatsapp", WhatsAppChannel)
"""Where a gateway app keeps its ``WhatsAppChannel``."""


def setup(
    app: web.Application,
    *,
    twilio_client: Any = None,
    resolver: SenderResolver | None = None,
    thread_for: ThreadNamer | None = None,
    texts: Mapping[str, WhatsAppTexts] | None = None,
    options: WhatsAppOptions | None = None,
) -> WhatsAppChannel:
    """Mount ``POST /channels/whatsapp`` and ``POST /channels/whatsapp/status`` on a gateway app.

    Args:
        app: An app made by ``create_app`` (it holds the ``GatewayServices``).
        twilio_client: A ready ``twilio.rest.Client``; one over an async HTTP client is built
            from the settings otherwise.
        resolver: Maps senders to actors (``SettingsSenderResolver`` by default).
        thread_for: Names a sender's thread (``keyed_thread_namer(secret)`` by default).
        texts: The channel's sentences by language (``TEXTS`` by default).
        options: Retries, delivery timing, inbound limits.

    Returns:
        The channel, also in ``app[WHATSAPP]``; it starts and stops with the app.
    """
    channel = WhatsAppChannel(
        app[SERVICES],
        twilio_client=twilio_client,
        resolver=resolver,
        thread_for=thread_for,
        texts=texts,
        options=options,
    )
    app[WHATSAPP] = channel
    app.router.add_post(INBOUND_PATH, inbound_handler)
    app.router.add_post(STATUS_PATH, status_handler)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        await channel.start()
        try:
            yield
        finally:
            await channel.aclose()

    app.cleanup_ctx.append(lifecycle)
    return channel
