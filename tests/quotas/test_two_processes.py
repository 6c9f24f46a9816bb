"""One actor's budget holds across two ``agora-gateway serve`` processes sharing one Redis.

Both run the demo model (it counts each reply's words as output tokens) with ``AGORA_QUOTA_DAY=1``
and a price from ``AGORA_PRICING``, on a key prefix of the test's own (``?prefix=``), dropped after.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from gateway import sign_actor_token
from tools import Actor

from ..cli.test_serve import SECRET_ENV, serving
from ..conftest import drop_prefix

pytestmark = pytest.mark.redis

ALICE = Actor(id="alice", roles=["member"])
BOB = Actor(id="bob", roles=["member"])
ENV = {
    "AGORA_QUOTA_DAY": "1",
    "AGORA_PRICING": json.dumps({"demo": {"input": 0, "output": 1_000_000}}),  # a dollar an output token
    "AGORA_TURN_BURST": "100",
}


def headers(actor: Actor) -> dict[str, str]:
    return {"Authorization": f"Bearer {sign_actor_token(actor, SECRET_ENV['AGORA_SECRET'], 600)}"}


async def frames_until(ws: aiohttp.ClientWebSocketResponse, *kinds: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(20):
        while not seen or seen[-1].get("type") not in kinds:
            seen.append(json.loads((await ws.receive()).data))
    return seen


async def say(port: int, actor: Actor, text: str) -> list[dict[str, Any]]:
    """One message on a new thread of ``actor`` through the web socket: its frames until the end or a refusal."""
    async with (
        aiohttp.ClientSession(headers=headers(actor)) as session,
        session.ws_connect(f"http://127.0.0.1:{port}/agent/ws") as ws,
    ):
        await ws.send_json({"type": "hello"})
        await frames_until(ws, "welcome")
        await ws.send_json({"type": "send", "text": text, "id": "f-1"})
        return await frames_until(ws, "run-finished", "error")


@pytest.fixture
async def store_url(redis_url: str) -> AsyncIterator[str]:
    prefix = f"test-quota-{uuid.uuid4().hex[:10]}"
    try:
        yield f"{redis_url}?prefix={prefix}"
    finally:
        await drop_prefix(redis_url, prefix)


async def test_one_actors_day_budget_holds_across_two_processes(store_url: str, redis_url: str) -> None:
    async with (
        serving(store=store_url, env=ENV) as (_, first, line),
        serving(store=store_url, env=ENV) as (_, second, _line),
    ):
        assert "store: redis" in line
        done = await say(first, ALICE, "hello")
        assert done[-1]["type"] == "run-finished" and done[-1]["status"] == "completed", done
        spent = done[-1]["usage"]["output_tokens"]
        assert spent >= 1 and done[-1]["cost_usd"] == pytest.approx(spent)  # priced by the setting

        refused = await say(second, ALICE, "hello again")  # the other process reads the same totals
        assert refused[-1]["type"] == "error", refused
        assert (refused[-1]["code"], refused[-1]["period"], refused[-1]["used"]) == ("quota_exceeded", "day", spent)
        assert (await say(second, BOB, "hello"))[-1]["status"] == "completed"  # Bob's budget is his own

        async with aiohttp.ClientSession(headers=headers(ALICE)) as session:
            async with session.get(f"http://127.0.0.1:{second}/agent/usage") as answer:
                assert answer.status == 200
                usage = await answer.json()
            async with session.get(f"http://127.0.0.1:{first}/metrics") as answer:
                metrics = await answer.text()
        assert usage["totals"]["tokens"] == spent and usage["totals"]["cost_usd"] == pytest.approx(spent)
        assert [(r["actor_key"], r["model"], r["steps"]) for r in usage["rows"]] == [("alice", "demo", 1)]
        counted = 'agora_model_tokens_total{agent="assistant",direction="output",model="demo"}'
        assert f"{counted} {float(spent)}" in metrics
