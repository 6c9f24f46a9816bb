"""A gateway with the Telegram channel, and a loopback Bot API recording every request.

The gateway app runs under aiohttp's test client; the Bot API is a second aiohttp server
(``BotApi``) whose URL is the channel's ``api_base``. Updates are posted with the secret token
header exactly as Telegram sends them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from pydantic import BaseModel

from channels.telegram import SECRET_HEADER, TELEGRAM, TelegramChannel, TelegramOptions, keyed_thread_namer
from channels.telegram import Chat as TgChat
from channels.telegram import User as TgUser
from channels.web import WebChannel
from gateway import (
    Agent,
    ApprovalPolicy,
    ApprovalRule,
    InboundOptions,
    MediaSource,
    PushOptions,
    RetryPolicy,
    Runtime,
    Settings,
)
from gateway import Gateway as App
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import Store
from tests.conftest import serve
from tools import ConfirmTemplate, ToolContext, ToolPresentation, UiCapabilities, define_tool

from .botapi import BOT_USERNAME, TOKEN, BotApi

SECRET = "test-secret-for-the-telegram-tests"
HOOK_SECRET = "hook_secret-123"
PUBLIC = "https://gw.example.test"

FAST_PUSH = PushOptions(
    slow_after=30.0, lock_retry=0.01, redeliver_after=0.02, max_rounds=3, capabilities=UiCapabilities()
)
"""Short delays; components as text (rendering PNGs spawns render workers: only where tested)."""
LOOPBACK_MEDIA = MediaSource(hosts=frozenset({"127.0.0.1"}), https_only=False, allow_loopback=True)
"""Files are downloaded from the loopback Bot API only (no test reaches Telegram)."""
FAST_RETRY = RetryPolicy(attempts=3, base_delay=0.001, factor=2.0, max_delay=2.0)


class RefundInput(BaseModel):
    order_id: str


def refund_tool(executed: list[str]) -> Any:
    @define_tool(
        name="refund_order",
        description="Refund an order.",
        input=RefundInput,
        kind="action",
        presentation=ToolPresentation(
            label="Refund",
            running="Refunding order {order_id}",
            done="Refunded order {order_id}",
            confirm=ConfirmTemplate(title="Refund order {order_id}?", verb="Refund", detail="Back to the card (4242)."),
        ),
    )
    async def refund_order(input: RefundInput, ctx: ToolContext) -> dict[str, Any]:
        executed.append(input.order_id)
        ctx.emit_ui(
            "Callout",
            {"tone": "success", "title": "Refunded", "text": f"Order {input.order_id}: €129.00"},
            fallback_text=f"Refund receipt for order {input.order_id}",
        )
        return {"order_id": input.order_id, "amount": 129.0}

    return refund_order


def refund_runtime(
    executed: list[str], *, store: Store | None = None, ttl: float = 3600.0, reply: str = "Refund done."
) -> Runtime:
    """A runtime whose model asks to refund order 1042, then answers ``reply``."""
    model = ScriptedModel(
        [
            ScriptStep(tool_calls=[ToolCallRequest(name="refund_order", args={"order_id": "1042"})]),
            ScriptStep(text=reply),
        ]
    )
    return Runtime(
        tools=[refund_tool(executed)],
        agents=[Agent(name="assistant")],
        model=model,
        store=store,
        approval_policy=ApprovalPolicy(default=ApprovalRule(ttl=ttl)),
        maintenance_interval=0.05 if ttl < 5 else None,
    )


def text_runtime(*texts: str, store: Store | None = None) -> Runtime:
    return Runtime(
        agents=[Agent(name="assistant")], model=ScriptedModel([ScriptStep(text=t) for t in texts]), store=store
    )


def thread_of(chat_id: int, user_id: int | None = None) -> str:
    chat = TgChat(id=chat_id, type="private" if user_id is None else "supergroup")
    return keyed_thread_namer(SECRET.encode())(chat, TgUser(id=user_id or chat_id))


@dataclass
class Gateway:
    client: TestClient[web.Request, web.Application]
    bot: BotApi
    runtime: Runtime

    @property
    def app(self) -> web.Application:
        return self.client.server.app

    @property
    def channel(self) -> TelegramChannel:
        return self.app[TELEGRAM]

    async def post(self, update: dict[str, Any] | bytes, *, secret: str | None = HOOK_SECRET, **kw: Any) -> Any:
        headers = {SECRET_HEADER: secret} if secret is not None else {}
        data = update if isinstance(update, bytes) else json.dumps(update).encode()
        response = await self.client.post(
            "/channels/telegram", data=data, headers={"Content-Type": "application/json", **headers}, **kw
        )
        await response.read()
        return response

    async def send(self, update: dict[str, Any]) -> None:
        response = await self.post(update)
        assert response.status == 200, await response.text()

    async def settle(self) -> None:
        async with asyncio.timeout(15):
            await self.channel.delivery.idle()


MakeGateway = Callable[..., Awaitable[Gateway]]


@pytest.fixture
async def make_gateway(aiohttp_client: Any) -> AsyncIterator[MakeGateway]:
    runtimes: list[Runtime] = []
    servers: list[TestServer] = []
    sessions: list[aiohttp.ClientSession] = []

    async def make(
        runtime: Runtime,
        *,
        bot: BotApi | None = None,
        push: PushOptions = FAST_PUSH,
        options: dict[str, Any] | None = None,
        app: App | None = None,
        media: MediaSource | None = None,
        **settings: Any,
    ) -> Gateway:
        """The channel on ``runtime``; with ``app`` (a ``gateway.Gateway``), its catalog and static folder too."""
        runtimes.append(runtime)
        bot = bot or BotApi()
        server = TestServer(bot.app())
        await server.start_server()
        servers.append(server)
        session = aiohttp.ClientSession()
        sessions.append(session)
        values: dict[str, Any] = {
            "bot_token": TOKEN,
            "webhook_secret": HOOK_SECRET,
            "api_base": str(server.make_url("")),
            "bot_username": BOT_USERNAME,
        }
        values.update(options or {})
        channel = TelegramChannel(
            TelegramOptions(_env_file=None, **values),  # type: ignore[call-arg]
            session=session,
            push=push,
            retry=FAST_RETRY,
            inbound=InboundOptions(busy_wait=5.0),
            media=media or LOOPBACK_MEDIA,
        )
        config_values: dict[str, Any] = {
            "secret": SECRET,
            "port": 0,
            "public_base_url": PUBLIC,
            "turn_burst": 100,
            "turn_rate_per_minute": 6000,
        }
        config = Settings(_env_file=None, **(config_values | settings))  # type: ignore[call-arg]
        channels = [WebChannel(), channel]
        served = serve(config, runtime, app, channels)
        client: TestClient[web.Request, web.Application] = await aiohttp_client(served)
        return Gateway(client=client, bot=bot, runtime=runtime)

    yield make
    for runtime in runtimes:
        await runtime.aclose()
    for session in sessions:
        await session.close()
    for server in servers:
        await server.close()
