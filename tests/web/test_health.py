"""``GET /healthz``: the store, the render workers and each channel; 503 only when the store is away."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from channels.telegram import TelegramChannel, TelegramOptions
from channels.whatsapp import TwilioOptions, WhatsAppChannel
from gateway import Channel, ChannelServices, Runtime, create_app
from gateway.models import ScriptedModel
from gateway.stores import RedisStore

from ..conftest import channels_for
from ..stores._server import RedisServer
from .conftest import settings

BOT_TOKEN = "123456789:AAhealth-test-token_never-shown00"
HOOK_SECRET = "health_hook_secret-X1"

Client = TestClient[Any, Any]


class Broken(Channel):
    """A channel whose ``health`` fails, and one whose answer is not JSON."""

    def __init__(self, name: str, answer: Any) -> None:
        self.name = name
        self.answer = answer

    def setup(self, app: web.Application, services: ChannelServices) -> None:
        """No routes."""

    def health(self) -> dict[str, Any]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return {"status": "ok", "since": self.answer}


@pytest.fixture
async def gateway(aiohttp_client: Any) -> AsyncIterator[Callable[..., Awaitable[Client]]]:
    sessions: list[aiohttp.ClientSession] = []

    async def make(*extra: Channel, runtime: Runtime | None = None) -> Client:
        session = aiohttp.ClientSession()
        sessions.append(session)
        telegram = TelegramOptions(  # type: ignore[call-arg]
            _env_file=None,
            bot_token=BOT_TOKEN,
            webhook_secret=HOOK_SECRET,
            bot_username="agora_test_bot",  # no getMe at start
            api_base="http://127.0.0.1:9",  # never reached
        )
        channels = [
            *channels_for({}),
            TelegramChannel(telegram, session=session),
            WhatsAppChannel(TwilioOptions(_env_file=None, account_sid="AC" + "0" * 32)),  # type: ignore[call-arg]
            *extra,
        ]
        client: Client = await aiohttp_client(create_app(settings(), runtime=runtime, channels=channels))
        return client

    yield make
    for session in sessions:
        await session.close()


async def test_health_reports_the_store_the_render_workers_and_every_channel(
    gateway: Callable[..., Awaitable[Client]],
) -> None:
    client = await gateway()
    answer = await client.get("/healthz")
    assert answer.status == 200 and answer.headers["Cache-Control"] == "no-store"
    body = await answer.json()
    assert body["status"] == "ok" and body["store"] == {"status": "ok", "kind": "memory"}
    assert body["instance"].count(":") == 2  # which process answered: host:pid:suffix
    workers = body["render_workers"]
    assert workers["status"] == "idle" and workers["size"] >= 1  # they start on the first image or PDF
    assert (workers["ready"], workers["busy"], workers["starting"]) == (0, 0, 0)
    channels = body["channels"]
    assert list(channels) == ["web", "ag-ui", "a2a", "mcp", "telegram", "whatsapp"]
    assert channels["web"] == channels["ag-ui"] == channels["a2a"] == channels["mcp"] == {"status": "ok"}
    assert channels["telegram"] == {
        "status": "ok",
        "delivery": {"running": True, "draining": 0, "retrying": 0, "scheduled": 0},
    }
    whatsapp = channels["whatsapp"]
    assert whatsapp["status"] == "disabled" and "AGORA_TWILIO_AUTH_TOKEN" in whatsapp["reason"]
    text = await answer.text()
    for secret in (BOT_TOKEN, HOOK_SECRET, "test-secret-for-the-web-tests"):
        assert secret not in text


async def test_a_channel_that_cannot_say_is_unknown_and_an_odd_value_is_a_string(
    gateway: Callable[..., Awaitable[Client]], caplog: pytest.LogCaptureFixture
) -> None:
    client = await gateway(Broken("flaky", RuntimeError("boom")), Broken("odd", Path("/x")))
    caplog.set_level(logging.INFO, "gateway.health")
    answer = await client.get("/healthz")
    assert answer.status == 200
    body = await answer.json()
    assert body["channels"]["flaky"] == {"status": "unknown"}
    assert body["channels"]["odd"] == {"status": "ok", "since": "/x"}
    [line] = [r for r in caplog.records if r.name == "gateway.health"]
    assert line.getMessage() == "health: channel flaky could not say: RuntimeError('boom')" and not line.exc_info


async def test_a_store_that_went_away_is_503_with_its_kind_and_not_its_address(
    gateway: Callable[..., Awaitable[Client]], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    server = RedisServer(tmp_path)
    await server.start()
    runtime = Runtime(model=ScriptedModel([]), store=RedisStore(server.url, timeout=2.0, retry=None))
    try:
        client = await gateway(runtime=runtime)  # starts: the store answers
        assert (await client.get("/healthz")).status == 200
    finally:
        server.kill()
    caplog.set_level(logging.INFO)
    answer = await client.get("/healthz")
    assert answer.status == 503
    body = await answer.json()
    assert body["status"] == "unavailable" and body["store"] == {"status": "unavailable", "kind": "redis"}
    assert body["channels"]["web"] == {"status": "ok"}  # the rest is still reported
    address = server.url.split("//", 1)[1].split("/")[0]
    assert address not in await answer.text()  # the store's address (and any password in it) stays in the log
    [line] = [r for r in caplog.records if r.name == "gateway.health"]
    assert line.levelno == logging.WARNING and line.getMessage().startswith("health: the store is unavailable: ")
    assert not [r for r in caplog.records if r.exc_info]
    await runtime.aclose()
