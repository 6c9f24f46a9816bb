"""The turn rate limit holds across two ``serve`` processes on one Redis: the burst once, not twice."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from gateway import sign_actor_token
from tools import Actor

from ..conftest import drop_prefix
from .test_serve import SECRET_ENV, serving

pytestmark = pytest.mark.redis

BURST = 3
ALICE = Actor(id="alice", roles=["member"])


@contextlib.asynccontextmanager
async def two_gateways(redis_url: str) -> AsyncIterator[tuple[int, int]]:
    """Two ``serve`` processes on one Redis under a prefix of the test's, its keys dropped after."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    store = f"{redis_url}{'&' if '?' in redis_url else '?'}prefix={prefix}"
    limits = {"AGORA_TURN_BURST": str(BURST), "AGORA_TURN_RATE_PER_MINUTE": "1"}
    try:
        async with (
            serving(store=store, env=limits) as (_, first, line),
            serving(store=store, env=limits) as (_, second, _line),
        ):
            assert f"(prefix {prefix})" in line, line
            yield first, second
    finally:
        await drop_prefix(redis_url, prefix)


async def answer(ws: aiohttp.ClientWebSocketResponse, frame_id: str) -> dict[str, Any]:
    """The ack or error of the frame ``frame_id`` (events of the runs pass by)."""
    async with asyncio.timeout(20):
        while True:
            frame = json.loads((await ws.receive()).data)
            if frame.get("id") == frame_id and frame["type"] in {"ack", "error"}:
                return dict(frame)


async def alternate_turns(ports: tuple[int, int]) -> list[tuple[str, str | None]]:
    """One actor's turns, sent to the first process, the second, the first...: each answer's type and code."""
    token = sign_actor_token(ALICE, SECRET_ENV["AGORA_SECRET"], 600)
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as session:
        sockets = [await session.ws_connect(f"http://127.0.0.1:{port}/agent/ws") for port in ports]
        for ws in sockets:
            await ws.send_json({"type": "hello"})
            await answer_of_type(ws, "welcome")
        answers = []
        for n in range(2 * BURST + 2):
            ws = sockets[n % 2]
            await ws.send_json({"type": "send", "text": f"hello {n}", "id": f"m{n}"})
            answers.append(await answer(ws, f"m{n}"))
        for ws in sockets:
            await ws.close()
    assert all(frame["retry_after"] > 1 for frame in answers if frame["type"] == "error")
    return [(frame["type"], frame.get("code")) for frame in answers]


async def anonymous_turns(ports: tuple[int, int]) -> list[tuple[str, str | None]]:
    """A turn from a new anonymous visitor each time (no cookie), from one address, to either process."""
    kinds = []
    for n in range(BURST + 2):
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(f"http://127.0.0.1:{ports[n % 2]}/agent/ws") as ws,
        ):
            await ws.send_json({"type": "hello"})
            await answer_of_type(ws, "welcome")
            await ws.send_json({"type": "send", "text": "hi", "id": "m"})
            frame = await answer(ws, "m")
            kinds.append((frame["type"], frame.get("code")))
    return kinds


async def test_the_turn_rate_limit_holds_across_two_processes_on_redis(redis_url: str) -> None:
    async with two_gateways(redis_url) as ports:
        # Per process, each would have let BURST through: together they let BURST through once.
        assert await alternate_turns(ports) == [("ack", None)] * BURST + [("error", "rate_limited")] * (BURST + 2)
        # Dropping the cookie makes a new anonymous actor: the address's bucket holds on both.
        assert await anonymous_turns(ports) == [("ack", None)] * BURST + [("error", "rate_limited")] * 2


async def answer_of_type(ws: aiohttp.ClientWebSocketResponse, kind: str) -> dict[str, Any]:
    async with asyncio.timeout(20):
        while True:
            frame = json.loads((await ws.receive()).data)
            if frame["type"] == kind:
                return dict(frame)
