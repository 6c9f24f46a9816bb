"""A minimal push channel: a signed webhook relay (docs/channels.md walks through it).

Your system posts people's messages to ``POST /channels/relay`` as JSON,
``{"id": "m-1", "from": "ana", "text": "refund order 1042"}`` or a tap
``{"id": "m-2", "from": "ana", "button": "agora:..."}``, with
``X-Relay-Signature: sha256=<hex HMAC-SHA256(secret, body)>``. The gateway answers 202 and posts
every message for that person to your ``outbox`` URL, signed the same way:
``{"to": "ana", "text": ...}``, ``{"to": "ana", "text": ..., "buttons": [{"title", "payload"}]}``
or ``{"to": "ana", "media": {"url", "mime", "filename"}, "caption": ...}``.

Serve it with: ``create_app(settings, channels=[WebChannel(), RelayChannel(outbox, secret)])``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from gateway import (
    ApprovalTokens,
    Channel,
    ChannelServices,
    ChatInbound,
    DeliveredUi,
    InboundMessage,
    PushDelivery,
    PushPort,
    PushSendError,
    PushTarget,
    parse_json,
    split_message,
    to_plain,
)
from gateway.events import ApprovalRequestedEvent
from tools import Actor, UiCapabilities


@dataclass(frozen=True)
class RelayPart:
    """One message for the outbox (its JSON is what is posted)."""

    to: str
    text: str = ""
    buttons: list[dict[str, str]] = field(default_factory=list)
    media: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value}


def signature(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


class RelayPort(PushPort[RelayPart]):
    """How events become outbox messages, and how one is posted."""

    via = "relay"
    capabilities = UiCapabilities(formats=["image", "text"])

    def __init__(self, outbox: str, secret: bytes) -> None:
        self.outbox, self.secret = outbox, secret
        self.http: aiohttp.ClientSession | None = None

    def text_parts(self, target: PushTarget, markdown: str) -> list[RelayPart]:
        return [RelayPart(to=target.address, text=piece) for piece in split_message(to_plain(markdown), 4000)]

    async def media_parts(self, target: PushTarget, delivered: DeliveredUi) -> list[RelayPart]:
        return [RelayPart(to=target.address, text=delivered.text or "", media=m.model_dump()) for m in delivered.media]

    async def approval_parts(
        self, target: PushTarget, event: ApprovalRequestedEvent, tokens: ApprovalTokens, number: int | None
    ) -> list[RelayPart]:
        texts = self.texts(target)
        buttons = [
            {"title": event.confirmation.verb or texts.approve, "payload": tokens.payload(True)},
            {"title": texts.reject, "payload": tokens.payload(False)},
        ]
        return [RelayPart(to=target.address, text=event.confirmation.title, buttons=buttons)]

    async def send(self, target: PushTarget, part: RelayPart) -> str | None:
        assert self.http is not None, "the channel has not started"
        body = json.dumps(part.to_json()).encode()
        headers = {"Content-Type": "application/json", "X-Relay-Signature": signature(self.secret, body)}
        try:
            async with self.http.post(self.outbox, data=body, headers=headers) as answer:
                if answer.status >= 300:
                    raise PushSendError(f"outbox answered {answer.status}", retryable=answer.status >= 500)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise PushSendError(f"outbox unreachable: {exc!r}", retryable=True) from exc
        return None


class RelayChannel(Channel):
    """``POST /channels/relay`` in, the outbox out, through the shared push kit."""

    name = "relay"
    capabilities = RelayPort.capabilities

    def __init__(self, outbox: str, secret: bytes) -> None:
        self.secret = secret
        self.port = RelayPort(outbox, secret)

    def setup(self, app: web.Application, services: ChannelServices) -> None:
        self.services = services
        self.delivery = PushDelivery(services, self.port, prefix="relay")
        self.inbound = ChatInbound(services, self.delivery, via=self.name)
        app.router.add_post("/channels/relay", self.webhook)
        self.mount_lifecycle(app)

    async def start(self) -> None:
        self.port.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        self.delivery.start()

    async def aclose(self) -> None:
        await self.delivery.aclose()
        if self.port.http is not None:
            await self.port.http.close()

    async def webhook(self, request: web.Request) -> web.Response:
        body = await request.read()  # the app caps bodies at 1 MB (413)
        sent = request.headers.get("X-Relay-Signature", "")
        if not hmac.compare_digest(sent.encode("utf-8", "surrogateescape"), signature(self.secret, body).encode()):
            raise web.HTTPForbidden(text="bad signature")
        try:
            message = parse_json(body)
        except ValueError as exc:
            raise web.HTTPBadRequest(text=f"not JSON: {exc}") from None
        if not isinstance(message, dict) or not all(isinstance(message.get(k), str) for k in ("id", "from")):
            raise web.HTTPBadRequest(text="want {id, from, text | button}")
        person = message["from"]
        try:
            actor = Actor(id=f"relay:{person}", roles=["member"])  # refuses control characters, overlong ids
        except ValueError:
            raise web.HTTPBadRequest(text="not a usable sender") from None
        if not person:
            raise web.HTTPBadRequest(text="not a usable sender")
        state = self.delivery.state
        if not await state.claim(state.key("msg", message["id"]), ttl=86400):
            return web.Response(status=202, text="seen")  # a replay: nothing happens twice
        target = PushTarget(
            thread_id=f"relay-{hashlib.sha256(person.encode()).hexdigest()[:24]}", address=person, actor_id=actor.id
        )
        checked = InboundMessage(
            target=target,
            actor=actor,
            text=str(message.get("text") or ""),
            button=message.get("button") if isinstance(message.get("button"), str) else None,
        )
        self.delivery.spawn(self._handle(checked), name=f"relay-{message['id']}")
        return web.Response(status=202, text="accepted")

    async def _handle(self, message: InboundMessage) -> None:
        async with self.inbound.in_order(message.target.address):  # one person's messages in order
            redeemed = await self.inbound.handle(message)
            if redeemed is not None and redeemed.reply:
                await self.delivery.reply(message.target, redeemed.reply)
