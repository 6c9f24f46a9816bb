"""Fixtures of the Cloud API tests: the recording Graph server and a gateway app with the channel."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from channels.web import WebChannel
from channels.whatsapp import (
    DeliveryOptions,
    WhatsAppCloudChannel,
    WhatsAppCloudOptions,
    WhatsAppSender,
    WhatsAppSenderOptions,
    keyed_thread_namer,
)
from gateway import Gateway, InboundOptions, MediaSource, RetryPolicy, Runtime, Settings
from tests.conftest import serve
from tools import Actor, UiCapabilities

from . import payloads as p
from .graph import PNID, TOKEN, VERSION, Graph


@pytest.fixture
async def graph() -> AsyncIterator[Graph]:
    recorder = Graph()
    await recorder.start()
    yield recorder
    await recorder.close()


# -- a gateway app with the Cloud API channel, its Graph played by the recorder ---------------------


SECRET = "test-secret-for-the-cloud-api-tests"
PATH = "/channels/whatsapp/cloud"

FAST = DeliveryOptions(
    slow_after=0.05, lock_retry=0.01, redeliver_after=0.02, max_rounds=3, capabilities=UiCapabilities()
)
"""Short delays; components as text (rendering PNGs spawns render workers: only where tested)."""
LOOPBACK_MEDIA = MediaSource(hosts=frozenset({"127.0.0.1"}), https_only=False, allow_loopback=True)
"""Received media are downloaded from the loopback Graph only (no test reaches Meta)."""
QUICK_RETRY = RetryPolicy(attempts=1)
"""One request per round: each failed request shows as one delivery round."""


def settings() -> Settings:
    values: dict[str, Any] = {"secret": SECRET, "port": 0, "turn_burst": 100, "turn_rate_per_minute": 6000}
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def options(graph: Graph, **overrides: Any) -> WhatsAppCloudOptions:
    values: dict[str, Any] = {
        "access_token": TOKEN,
        "app_secret": p.APP_SECRET,
        "verify_token": p.VERIFY_TOKEN,
        "phone_number_id": PNID,
        "api_version": VERSION,
        "graph_base": graph.base,
    }
    values.update(overrides)
    return WhatsAppCloudOptions(_env_file=None, **values)  # type: ignore[call-arg]


def thread_of(number: str) -> str:
    """The thread the channel gives a sender: an HMAC of the number under the test secret."""
    sender = WhatsAppSender(address=f"whatsapp:+{number}", e164=f"+{number}")
    return keyed_thread_namer(SECRET.encode())(Actor(id=f"whatsapp:+{number}"), sender)


@dataclass
class Cloud:
    """An app under the test client, its Cloud API channel and the recording Graph."""

    client: TestClient[web.Request, web.Application]
    graph: Graph
    channel: WhatsAppCloudChannel

    async def post(
        self, payload: dict[str, Any] | bytes, *, signature: str | None = None, headers: dict[str, str] | None = None
    ) -> aiohttp.ClientResponse:
        """Post a notification signed over its exact bytes (or with the ``signature`` given)."""
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        sent = {"Content-Type": "application/json", "X-Hub-Signature-256": signature or p.signature(body)}
        response = await self.client.post(PATH, data=body, headers={**sent, **(headers or {})})
        await response.read()
        return response

    async def say(self, text: str, *, number: str = p.ALICE) -> str:
        """Send a text message; its ``wamid``."""
        wamid = p.wamid()
        response = await self.post(p.text(text, number=number, id=wamid))
        assert response.status == 200, await response.text()
        return wamid

    async def settle(self) -> None:
        """Wait until inbound handling and delivery drains on this app have finished."""
        async with asyncio.timeout(15):
            await self.channel.delivery.idle()


MakeCloud = Callable[..., Awaitable[Cloud]]


@pytest.fixture
async def make_cloud(aiohttp_client: Any, graph: Graph) -> AsyncIterator[MakeCloud]:
    runtimes: list[Runtime] = []

    async def make(
        runtime: Runtime | None = None,
        *,
        delivery: DeliveryOptions = FAST,
        retry: RetryPolicy = QUICK_RETRY,
        senders: WhatsAppSenderOptions | None = None,
        app: Gateway | None = None,
        media: MediaSource = LOOPBACK_MEDIA,
        **overrides: Any,
    ) -> Cloud:
        """The channel on ``runtime``, or serving ``app`` (a ``gateway.Gateway``) on a runtime of its own."""
        config = settings()
        if app is not None and runtime is None:
            runtime = app.runtime(config)
        if runtime is not None:
            runtimes.append(runtime)
        channel = WhatsAppCloudChannel(
            options(graph, **overrides),
            senders=senders or WhatsAppSenderOptions(_env_file=None),  # type: ignore[call-arg]
            delivery=delivery,
            retry=retry,
            inbound=InboundOptions(busy_wait=5.0),
            media=media,
        )
        channels = [WebChannel(), channel]
        served = serve(config, runtime, app, channels)
        client: TestClient[web.Request, web.Application] = await aiohttp_client(served)
        return Cloud(client=client, graph=graph, channel=channel)

    yield make
    for runtime in runtimes:
        await runtime.aclose()
