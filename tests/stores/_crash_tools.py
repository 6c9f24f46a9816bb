"""Tools shared by a gateway process the tests kill and the process that takes over.

Each tool records its effect in Redis under the test's prefix, keyed by idempotency key, so the
test sees what ran where. In the process marked ``AGORA_TEST_HANG=1`` the second tool hangs after
recording its attempt, which is where that process gets killed.
"""

from __future__ import annotations

import asyncio
import os

import redis.asyncio as redis
from pydantic import BaseModel

from gateway.models import ModelRequest, ScriptStep, ToolCallRequest
from tools import ToolContext, define_tool


class CityInput(BaseModel):
    city: str


def _client() -> redis.Redis:
    return redis.Redis.from_url(os.environ["AGORA_TEST_REDIS_URL"])


async def _record(kind: str, key: str) -> None:
    client = _client()
    try:
        await client.rpush(f"{os.environ['AGORA_TEST_PREFIX']}:effects:{kind}", key)
    finally:
        await client.aclose()


@define_tool(name="quick_lookup", description="Settles at once.", input=CityInput)
async def quick_lookup(input: CityInput, ctx: ToolContext) -> dict[str, str]:
    await _record("quick", ctx.idempotency_key)
    return {"city": input.city}


@define_tool(name="slow_lookup", description="Slow; hangs in the process that gets killed.", input=CityInput)
async def slow_lookup(input: CityInput, ctx: ToolContext) -> dict[str, str]:
    await _record("slow", ctx.idempotency_key)
    if os.environ.get("AGORA_TEST_HANG") == "1":
        await asyncio.Event().wait()
    return {"city": input.city}


def script(request: ModelRequest, index: int) -> ScriptStep:
    """Step 0 calls the quick tool, step 1 the slow one, step 2 answers."""
    if request.step == 0:
        return ScriptStep(tool_calls=[ToolCallRequest(name="quick_lookup", args={"city": "Lisbon"})])
    if request.step == 1:
        return ScriptStep(tool_calls=[ToolCallRequest(name="slow_lookup", args={"city": "Porto"})])
    return ScriptStep(text="Both looked up.")
