"""A gateway with the WhatsApp channel, a recording Twilio HTTP client and signed webhooks.

Inbound requests are signed exactly as Twilio signs them: ``RequestValidator(token)
.compute_signature(url, params)`` over the public URL from the settings. Outbound requests go
through the real twilio ``Client`` to ``RecordingHttp``, which records every request and answers
what a test scripted (201 by default, or errors, or an unreachable network).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from twilio.http import AsyncHttpClient
from twilio.http.response import Response
from twilio.request_validator import HMAC_SHA256, RequestValidator
from twilio.rest import Client

from channels.web import WebChannel
from channels.whatsapp import (
    WHATSAPP,
    WHATSAPP_CAPABILITIES,
    DeliveryOptions,
    InboundOptions,
    RetryPolicy,
    TwilioOptions,
    WhatsAppChannel,
    WhatsAppOptions,
    WhatsAppSenderOptions,
)
from gateway import Gateway as App
from gateway import MediaSource, Runtime, Settings
from tests.conftest import serve
from tools import UiCapabilities

SECRET = "test-secret-for-the-whatsapp-tests"
AUTH_TOKEN = "test-twilio-auth-token"
SHARED_KEY = "test-twilio-shared-key"
ACCOUNT_SID = "AC" + "0" * 32
PUBLIC = "https://gw.example.test"
INBOUND_URL = f"{PUBLIC}/channels/whatsapp"
STATUS_URL = f"{PUBLIC}/channels/whatsapp/status"
FROM = "whatsapp:+14155238886"
ALICE = "+15551230001"
BRUNA = "+5511987650002"
MESSAGES_URL = f"https://api.twilio.com/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json"
CONTENT_URL = "https://content.twilio.com/v1/Content"

FAST = WhatsAppOptions(
    retry=RetryPolicy(attempts=3, base_delay=0.001, factor=2.0, max_delay=0.004),
    delivery=DeliveryOptions(
        slow_after=0.05, lock_retry=0.01, redeliver_after=0.02, max_rounds=3, capabilities=UiCapabilities()
    ),
    inbound=InboundOptions(
        busy_wait=5.0, media=MediaSource(hosts=frozenset({"127.0.0.1"}), https_only=False, allow_loopback=True)
    ),
)
"""Short delays; components as text (rendering PNGs spawns render workers: only where tested);
provider media only from loopback (no test reaches Twilio)."""
MEDIA = replace(FAST, delivery=replace(FAST.delivery, capabilities=WHATSAPP_CAPABILITIES))
"""``FAST`` with WhatsApp's own capabilities: images and PDFs."""


@dataclass
class Recorded:
    """One request the twilio SDK made."""

    method: str
    url: str
    data: dict[str, Any]
    headers: dict[str, str]
    status: int = 0
    sid: str = ""
    """The sid Twilio answered with (``SM...`` / ``HX...``)."""

    @property
    def is_message(self) -> bool:
        return self.url == MESSAGES_URL

    @property
    def variables(self) -> dict[str, str]:
        loaded: dict[str, str] = json.loads(self.data["ContentVariables"])
        return loaded


Answer = int | Exception | tuple[int, dict[str, Any] | str]


@dataclass
class RecordingHttp(AsyncHttpClient):  # type: ignore[misc]
    """An async twilio HTTP client that records requests and answers from a script.

    ``script`` holds answers for the next requests, in order: a status (an error body is made
    for >= 400), ``(status, body)`` (a ``str`` body goes as it is: a garbled answer), or an
    exception to raise (``aiohttp.ClientConnectionError`` plays an unreachable Twilio). With the
    script empty, requests succeed (201).
    """

    requests: list[Recorded] = field(default_factory=list)
    script: list[Answer] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def __post_init__(self) -> None:
        super().__init__(logging.getLogger("tests.twilio"), is_async=True)
        self._sids = itertools.count(1)

    async def request(
        self,
        method: str,
        uri: str,
        params: dict[str, object] | None = None,
        data: dict[str, object] | None = None,
        headers: dict[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        timeout: float | None = None,
        allow_redirects: bool = False,
    ) -> Response:
        record = Recorded(method, uri, dict(data or {}), dict(headers or {}))
        answer: Answer = self.script.pop(0) if self.script else 201
        async with self.changed:
            self.requests.append(record)
            self.changed.notify_all()
        if isinstance(answer, Exception):
            raise answer
        status, body = answer if isinstance(answer, tuple) else (answer, None)
        record.status = status
        if isinstance(body, str):
            return Response(status, body)
        if body is None:
            if status >= 400:
                body = {"code": 20429 if status == 429 else 20500, "message": f"error {status}", "status": status}
            elif uri == CONTENT_URL:
                body = {"sid": f"HX{next(self._sids):032d}", "friendly_name": (data or {}).get("friendly_name")}
            else:
                body = {"sid": f"SM{uuid.uuid4().hex}", "status": "queued", "to": (data or {}).get("To")}
        record.sid = str(body.get("sid", ""))
        return Response(status, json.dumps(body))

    # -- reading what was sent ---------------------------------------------------------------------

    def messages(self, *, ok: bool = True) -> list[Recorded]:
        """Message requests (those Twilio accepted, unless ``ok=False``)."""
        return [r for r in self.requests if r.is_message and (not ok or r.status == 201)]

    def bodies(self) -> list[str]:
        return [str(r.data.get("Body", "")) for r in self.messages() if "Body" in r.data]

    async def wait_for(self, predicate: Callable[[RecordingHttp], bool], timeout: float = 10.0) -> None:
        """Until ``predicate(self)`` holds (checked at each request), with a watchdog."""
        async with asyncio.timeout(timeout), self.changed:
            await self.changed.wait_for(lambda: predicate(self))

    async def wait_messages(self, count: int, timeout: float = 10.0) -> list[Recorded]:
        await self.wait_for(lambda h: len(h.messages()) >= count, timeout)
        return self.messages()


_TWILIO = {
    "twilio_account_sid": "account_sid",
    "twilio_auth_token": "auth_token",
    "whatsapp_from": "from_",
    "whatsapp_messaging_service_sid": "messaging_service_sid",
    "whatsapp_approval_template_sid": "approval_template_sid",
    "whatsapp_shared_key": "shared_key",
    "twilio_agent": "agent",
    "twilio_agents": "agents",
}
_SENDERS = {
    "whatsapp_roles": "roles",
    "whatsapp_default_roles": "default_roles",
    "whatsapp_allow_unknown": "allow_unknown",
    "whatsapp_languages": "languages",
}


def settings(**overrides: Any) -> Settings:
    """The core settings of a test gateway (WhatsApp's own keys are left to ``channel_options``)."""
    values: dict[str, Any] = {
        "secret": SECRET,
        "port": 0,
        "public_base_url": PUBLIC,
        "turn_burst": 100,
        "turn_rate_per_minute": 6000,
    }
    values.update({k: v for k, v in overrides.items() if k not in _TWILIO and k not in _SENDERS})
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def channel_options(**overrides: Any) -> tuple[TwilioOptions, WhatsAppSenderOptions]:
    """The channel's options: the test account, number and keys, with ``overrides`` by their old names."""
    twilio: dict[str, Any] = {
        "account_sid": ACCOUNT_SID,
        "auth_token": AUTH_TOKEN,
        "from_": FROM,
        "shared_key": SHARED_KEY,
    }
    twilio.update({_TWILIO[k]: v for k, v in overrides.items() if k in _TWILIO})
    senders = {_SENDERS[k]: v for k, v in overrides.items() if k in _SENDERS}
    return (
        TwilioOptions(_env_file=None, **twilio),  # type: ignore[call-arg]
        WhatsAppSenderOptions(_env_file=None, **senders),  # type: ignore[call-arg]
    )


def sign(url: str, params: dict[str, str], *, shared_key: bool = False) -> dict[str, str]:
    """The headers Twilio sends with a webhook: the signature (and the SharedKey settings)."""
    if shared_key:
        signature = RequestValidator(SHARED_KEY).compute_signature(url, params, algorithm=HMAC_SHA256)
        return {
            "X-Twilio-Signature": signature,
            "X-Twilio-Webhooks-Signature-Settings": "key=webhooks_sharedkey_test,algorithm=HMAC_SHA256",
        }
    return {"X-Twilio-Signature": RequestValidator(AUTH_TOKEN).compute_signature(url, params)}


def inbound(body: str = "", *, number: str = ALICE, **extra: str) -> dict[str, str]:
    """The form fields of one inbound WhatsApp message, as Twilio posts them."""
    sid = "SM" + uuid.uuid4().hex
    fields = {
        "MessageSid": sid,
        "SmsMessageSid": sid,
        "SmsSid": sid,
        "AccountSid": ACCOUNT_SID,
        "From": f"whatsapp:{number}",
        "To": FROM,
        "Body": body,
        "NumMedia": "0",
        "NumSegments": "1",
        "ProfileName": "Alice",
        "WaId": number.lstrip("+"),
        "MessageType": "text",
        "ApiVersion": "2010-04-01",
    }
    fields.update(extra)
    return fields


def button(payload: str, title: str, *, number: str = ALICE) -> dict[str, str]:
    """A tapped quick-reply button."""
    return inbound(title, number=number, ButtonPayload=payload, ButtonText=title, MessageType="button")


@dataclass
class Gateway:
    """An app under the test client, with its recording Twilio HTTP client."""

    client: TestClient[web.Request, web.Application]
    http: RecordingHttp
    runtime: Runtime | None

    @property
    def app(self) -> web.Application:
        return self.client.server.app

    @property
    def channel(self) -> WhatsAppChannel:
        return self.app[WHATSAPP]

    async def post(
        self, fields: dict[str, str], *, url: str = INBOUND_URL, shared_key: bool = False, headers: Any = None
    ) -> aiohttp.ClientResponse:
        """Post a webhook signed as Twilio does."""
        path = url.removeprefix(PUBLIC)
        signed = sign(url, fields, shared_key=shared_key)
        response = await self.client.post(path, data=fields, headers={**signed, **(headers or {})})
        await response.read()
        return response

    async def say(self, text: str, *, number: str = ALICE) -> aiohttp.ClientResponse:
        response = await self.post(inbound(text, number=number))
        assert response.status == 200, await response.text()
        return response

    async def settle(self) -> None:
        """Wait until inbound handling and delivery drains on this app have finished."""
        async with asyncio.timeout(10):
            await self.channel.delivery.idle()


MakeGateway = Callable[..., Awaitable[Gateway]]


@pytest.fixture
async def make_gateway(aiohttp_client: Any) -> AsyncIterator[MakeGateway]:
    runtimes: list[Runtime] = []

    async def make(
        runtime: Runtime | None = None,
        *,
        options: WhatsAppOptions = FAST,
        http: RecordingHttp | None = None,
        app: App | None = None,
        **overrides: Any,
    ) -> Gateway:
        """The channel on ``runtime``, or serving ``app`` (a ``gateway.Gateway``: its catalog and static folder)."""
        config = settings(**overrides)
        if app is not None and runtime is None:
            runtime = app.runtime(config)  # the app's tools, agents and model; closed by this fixture
        if runtime is not None:
            runtimes.append(runtime)
        http = http or RecordingHttp()
        twilio = Client(ACCOUNT_SID, AUTH_TOKEN, http_client=http)
        twilio_options, senders = channel_options(**overrides)
        channel = WhatsAppChannel(twilio_options, senders=senders, twilio_client=twilio, options=options)
        channels = [WebChannel(), channel]
        served = serve(config, runtime, app, channels)
        client: TestClient[web.Request, web.Application] = await aiohttp_client(served)
        return Gateway(client=client, http=http, runtime=runtime)

    yield make
    for runtime in runtimes:
        await runtime.aclose()


def thread_of(number: str) -> str:
    """The thread the channel gives a sender: an HMAC of the number under the test secret."""
    from channels.whatsapp import WhatsAppSender, keyed_thread_namer
    from tools import Actor

    sender = WhatsAppSender(address=f"whatsapp:{number}", e164=number)
    return keyed_thread_namer(SECRET.encode())(Actor(id=f"whatsapp:{number}"), sender)
