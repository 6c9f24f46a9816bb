"""Redis refusing writes for a while (OOM: maxmemory reached) is an outage: the step is held, the tool runs once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as redis
from pydantic import BaseModel

from gateway import Runtime, Turn
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import RedisStore
from tools import Actor, ToolContext, define_tool

from ._server import RedisServer

pytestmark = pytest.mark.redis


class KeyInput(BaseModel):
    key: str


async def test_a_full_redis_holds_the_step_like_an_outage(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    await server.start()
    admin = redis.Redis(port=server.port)
    started, release = asyncio.Event(), asyncio.Event()
    attempts: list[str] = []

    @define_tool(name="charge", description="Charges.", input=KeyInput)
    async def charge(input: KeyInput, ctx: ToolContext) -> dict[str, Any]:
        attempts.append(ctx.idempotency_key)
        started.set()
        await release.wait()
        return {"charged": input.key}

    def plan(request: ModelRequest, index: int) -> ScriptStep:
        if request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="charge", args={"key": "a"})])
        return ScriptStep(text="Charged.")

    store = RedisStore(server.url, prefix="oom")
    runtime = Runtime(tools=[charge], model=ScriptedModel(plan), store=store, lease_ttl=0.5, maintenance_interval=0.1)
    try:
        run_id = await runtime.start_turn(Turn(thread_id="t-oom", actor=Actor(id="u1"), text="charge"))
        async with asyncio.timeout(10):
            await started.wait()
        await admin.config_set("maxmemory", "1")  # full: every write is refused with OOM
        release.set()  # the tool finishes while Redis refuses writes
        outcome: Any
        try:
            outcome = await runtime.wait(run_id, timeout=1.0)
        except TimeoutError:
            outcome = "held"  # what an outage gives: the step is held
        except Exception as exc:
            outcome = exc
        await admin.config_set("maxmemory", "0")  # room again
        async with asyncio.timeout(10):
            while (run := await store.get_run(run_id)) is None or run.status == "running":
                await asyncio.sleep(0.05)
    finally:
        release.set()
        await runtime.aclose()
        await store.aclose()
        await admin.aclose()
        server.kill()
    summary = f"wait() gave {outcome!r}; the run ended {run.status} {run.error}; the tool ran {len(attempts)}x"
    assert (outcome, run.status, len(attempts)) == ("held", "completed", 1), summary
