"""The agents of the handoff kill test, built alike by the doomed process and the survivor.

``main`` asks ``ops`` to purge a key; ``ops`` calls ``purge_cache`` (an action: it parks on an
approval). The purge records its idempotency key in Redis (``AGORA_TEST_REDIS_URL`` under
``AGORA_TEST_PREFIX``), so the test sees how often it ran, on whichever process.
"""

from __future__ import annotations

import os
from typing import Any

import redis.asyncio as redis
from pydantic import BaseModel

from gateway import Agent
from gateway.models import ToolCallRequest
from tools import ConfirmTemplate, ToolPresentation, define_tool

from .conftest import asks, replying


class KeyInput(BaseModel):
    key: str


@define_tool(
    name="purge_cache",
    description="Purge one cache key.",
    input=KeyInput,
    kind="action",
    presentation=ToolPresentation(
        label="Cache purge", running="Purging {key}", done="Purged {key}", confirm=ConfirmTemplate(title="Purge {key}?")
    ),
)
async def recorded_purge(input: KeyInput, ctx: Any) -> dict[str, str]:
    client = redis.Redis.from_url(os.environ["AGORA_TEST_REDIS_URL"])
    try:
        await client.rpush(f"{os.environ['AGORA_TEST_PREFIX']}:effects:purge", ctx.idempotency_key)
    finally:
        await client.aclose()
    return {"purged": input.key}


def agents() -> list[Agent]:
    purge = ToolCallRequest(name="purge_cache", args={"key": "sessions:42"})
    return [
        Agent(name="main", handoffs=["ops"], model=asks("ask_ops", "Purge sessions:42", then="All done.")),
        Agent(name="ops", model=replying(purge, text="Purged it.")),
    ]
