"""``WhatsAppChannel``: WhatsApp through Twilio, its parts wired together on the channel kit."""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from gateway import Channel, ChannelServices, PushDelivery, RetryPolicy, StaffMember
from tools import UserError

from ._approvals import ApprovalButtons
from ._identity import (
    SenderResolver,
    SettingsSenderResolver,
    ThreadNamer,
    keyed_thread_namer,
    staff_members,
)
from ._inbound import InboundHandler, InboundOptions
from ._options import TwilioOptions, WhatsAppSenderOptions
from ._outbound import WHATSAPP_CAPABILITIES, DeliveryOptions, WhatsAppPort
from ._sender import JsonAsyncTwilioHttpClient, OutboundMessage, TwilioSender
from ._state import ChannelState
from ._status import StatusCallbacks
from ._texts import TEXTS, WhatsAppTexts
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


class WhatsAppChannel(Channel):
    """WhatsApp through Twilio on one gateway app: webhooks in, deliveries out, approvals.

    Built from ``TwilioOptions`` (``AGORA_TWILIO_*``) and ``WhatsAppSenderOptions``
    (``AGORA_WHATSAPP_*``), read from the environment when not given. Without the Twilio
    credentials it stays off: its routes answer 503 and say which setting is missing.
    """

    name = "whatsapp"
    capabilities = WHATSAPP_CAPABILITIES

    def __init__(
        self,
        twilio: TwilioOptions | None = None,
        *,
        senders: WhatsAppSenderOptions | None = None,
        twilio_client: Any = None,
        resolver: SenderResolver | None = None,
        thread_for: ThreadNamer | None = None,
        texts: Mapping[str, WhatsAppTexts] | None = None,
        options: WhatsAppOptions | None = None,
    ) -> None:
        self.twilio = twilio if twilio is not None else TwilioOptions()
        self.senders = senders if senders is not None else WhatsAppSenderOptions()
        self.options = options or WhatsAppOptions()
        self.disabled_reason = self.twilio.missing(has_client=twilio_client is not None)
        self._client = twilio_client
        self._owned_http: Any = None
        self._started = False
        self.resolver: SenderResolver = resolver or SettingsSenderResolver.from_options(self.senders)
        self._thread_for = thread_for
        self.texts: Mapping[str, WhatsAppTexts] = dict(texts or TEXTS)
        self._services: ChannelServices | None = None

    @property
    def services(self) -> ChannelServices:
        if self._services is None:
            raise RuntimeError("the WhatsApp channel is not set up on an app yet")
        return self._services

    def setup(self, app: web.Application, services: ChannelServices) -> None:
        """Mount ``POST /channels/whatsapp`` and ``POST /channels/whatsapp/status``; start and stop with ``app``."""
        self._services = services
        self._build()
        app[WHATSAPP] = self
        app.router.add_post(INBOUND_PATH, inbound_handler)
        app.router.add_post(STATUS_PATH, status_handler)
        self.mount_lifecycle(app)

    def _build(self) -> None:
        services = self.services
        settings = services.settings
        twilio = self.twilio
        for variable, name in [
            ("AGORA_TWILIO_AGENT", twilio.agent),
            *(("AGORA_TWILIO_AGENTS", a) for a in twilio.agents.values()),
        ]:
            if name is not None and name not in services.runtime.agents:
                raise UserError(f"{variable} names agent {name!r}, which this gateway does not serve")
        self.state = services.state(self.options.key_prefix, ChannelState)
        self.thread_for: ThreadNamer = self._thread_for or keyed_thread_namer(services.secret)
        self.verifier = WebhookVerifier(
            auth_token=twilio.auth_token.get_secret_value() if twilio.auth_token else None,
            shared_key=twilio.shared_key.get_secret_value() if twilio.shared_key else None,
            public_base_url=settings.public_base_url,
            trust_forwarded=settings.trust_forwarded,
        )
        self.sender = TwilioSender(
            self._client,
            from_=twilio.from_,
            messaging_service_sid=twilio.messaging_service_sid,
            status_callback=f"{settings.public_base_url}{STATUS_PATH}" if settings.public_base_url else None,
            retry=self.options.retry,
        )
        self.buttons = ApprovalButtons(self.state, self.sender, template_sid=twilio.approval_template_sid)
        self.port = WhatsAppPort(
            state=self.state,
            sender=self.sender,
            buttons=self.buttons,
            window=self.options.delivery.window,
            staff=self.staff_targets,
        )
        self.delivery: PushDelivery[OutboundMessage] = PushDelivery(
            services,
            self.port,
            prefix=self.options.key_prefix,
            options=self.options.delivery,
            texts=dict(self.texts),
            state=self.state,
        )
        self.status = StatusCallbacks(
            state=self.state,
            sender=self.sender,
            delivery=self.delivery,
            template_sid=twilio.approval_template_sid,
            options=self.options.delivery,
        )
        self.inbound = InboundHandler(
            services=services,
            state=self.state,
            delivery=self.delivery,
            resolver=self.resolver,
            thread_for=self.thread_for,
            languages=self.senders.languages,
            options=self.options.inbound,
            media_auth=_media_auth(twilio),
            agent_for=twilio.agent_for,
        )

    async def staff_targets(self, role: str) -> list[StaffMember]:
        """The chats of the configured numbers (``AGORA_WHATSAPP_ROLES``) holding ``role``.

        Each number is resolved by the channel's resolver, so the actor a card is bound to is
        the one its tap resolves to. A custom resolver that is no ``RoleMap`` names no staff.
        """
        return await staff_members(
            self.resolver,
            role,
            thread_for=self.thread_for,
            languages=self.senders.languages,
            extra=lambda sender: {"e164": sender.e164},
        )

    def configure(
        self,
        *,
        resolver: SenderResolver | None = None,
        thread_for: ThreadNamer | None = None,
        texts: Mapping[str, WhatsAppTexts] | None = None,
        options: WhatsAppOptions | None = None,
    ) -> None:
        """Replace the resolver, thread namer, texts or options of a set-up channel before it starts.

        Raises:
            RuntimeError: The channel already started.
        """
        if self._started:
            raise RuntimeError("Cannot configure a WhatsApp channel that already started")
        self.options = options or self.options
        self.resolver = resolver or self.resolver
        self._thread_for = thread_for or self._thread_for
        self.texts = dict(texts or self.texts)
        if self._services is not None:
            self._build()

    @property
    def enabled(self) -> bool:
        """Whether the channel runs (configured and started)."""
        return self.disabled_reason is None and self._started

    def health(self) -> dict[str, Any]:
        """The channel's state and, when configured, its delivery's counts on this process."""
        found = super().health()
        if self.disabled_reason is None:  # the delivery is made by setup
            found["delivery"] = self.delivery.health()
        return found

    async def start(self) -> None:
        """Open the Twilio HTTP client (unless one was given) and start delivering."""
        if self.disabled_reason is not None:
            logger.info("WhatsApp channel off: %s", self.disabled_reason)
            return
        if self._client is None:
            from twilio.rest import Client

            twilio = self.twilio
            self._owned_http = JsonAsyncTwilioHttpClient(timeout=30.0)
            token = twilio.auth_token.get_secret_value() if twilio.auth_token else None
            self._client = Client(twilio.account_sid, token, http_client=self._owned_http)
        self.sender.client = self._client
        self.delivery.start()
        self._started = True
        logger.info("WhatsApp channel on at %s", self.verifier.public_base_url or "(the request's own URL)")
        settings = self.services.settings
        if not settings.public_base_url:
            logger.warning(
                "AGORA_PUBLIC_BASE_URL is not set: Twilio cannot fetch images and PDFs from %s, and no "
                "status callbacks are asked for. Set it to the URL Twilio reaches this gateway at.",
                settings.base_url(),
            )

    async def aclose(self) -> None:
        """Stop delivering and close what ``start`` opened."""
        if not self._started:
            return
        self._started = False
        await self.delivery.aclose()
        if self._owned_http is not None:
            await self._owned_http.close()
            self._owned_http = None


WHATSAPP = web.AppKey("agora_whatsapp", WhatsAppChannel)
"""Where a gateway app keeps its ``WhatsAppChannel``."""


def setup(app: web.Application, services: ChannelServices, **kwargs: Any) -> WhatsAppChannel:
    """Mount a ``WhatsAppChannel(**kwargs)`` on ``app`` (``create_app`` does it for you when configured)."""
    channel = WhatsAppChannel(**kwargs)
    channel.setup(app, services)
    return channel


def _media_auth(twilio: TwilioOptions) -> dict[str, str]:
    """The account's credentials, which Twilio's media URLs want (basic auth), as a header."""
    if not (twilio.account_sid and twilio.auth_token):
        return {}
    pair = f"{twilio.account_sid}:{twilio.auth_token.get_secret_value()}".encode()
    return {"Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}
