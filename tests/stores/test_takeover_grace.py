"""The takeover grace starts again after sweeps that failed: a lapse seen before an outage does not count."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from pydantic import BaseModel

from gateway import Runtime, StoreUnavailableError, Turn
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import MemoryStore
from tools import Actor, ToolContext, define_tool


class FlakyStore(MemoryStore):
    """A MemoryStore that can be 'down' (every lease/channel call raises StoreUnavailableError)."""

    down = False

    def _check(self) -> None:
        if self.down:
            raise StoreUnavailableError("the store is away")

    async def expired_leases(self, limit: int = 100) -> list[tuple[str, str]]:
        self._check()
        return await super().expired_leases(limit)

    async def renew_lease(self, *a: Any, **kw: Any) -> bool:
        self._check()
        return await super().renew_lease(*a, **kw)

    async def channel_get(self, *a: Any, **kw: Any) -> Any:
        self._check()
        return await super().channel_get(*a, **kw)

    async def claim_run(self, *a: Any, **kw: Any) -> Any:
        self._check()
        return await super().claim_run(*a, **kw)


class KeyInput(BaseModel):
    key: str


async def test_a_lapse_seen_before_an_outage_does_not_skip_the_grace_after_it() -> None:
    """B saw A's lease lapsed once; then the store was away (B's sweeps failed) for longer than
    the grace. The first look after the store is back must not take the run over at once: A,
    alive and holding, has had no chance to renew yet."""
    store = FlakyStore()
    started, release = asyncio.Event(), asyncio.Event()

    @define_tool(name="charge", description="Charges.", input=KeyInput)
    async def charge(input: KeyInput, ctx: ToolContext) -> dict[str, str]:
        started.set()
        await release.wait()
        return {"charged": input.key}

    def plan(request: ModelRequest, index: int) -> ScriptStep:
        if request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="charge", args={"key": "a"})])
        return ScriptStep(text="Charged.")

    grace = 0.3
    common: dict[str, Any] = dict(tools=[charge], model=ScriptedModel(plan), store=store, lease_ttl=0.1)
    a = Runtime(**common, instance_id="A", maintenance_interval=1000)  # its sweeps do not run in the test
    b = Runtime(**common, instance_id="B", maintenance_interval=1000, takeover_grace=grace)
    try:
        run_id = await a.start_turn(Turn(thread_id="t-grace", actor=Actor(id="u1"), text="charge"))
        async with asyncio.timeout(5):
            await started.wait()
            while not await store.expired_leases():  # A's lease lapses (A is slow, or cut off)
                await asyncio.sleep(0.02)
        await b.sweep()
        first_look = time.monotonic()
        assert run_id not in b._tasks, "first look: only remembered"

        store.down = True  # the store goes away; B's sweeps fail before they reach the takeover
        async with asyncio.timeout(5):
            while time.monotonic() - first_look < grace * 2:  # the outage itself, longer than the grace
                with pytest.raises(StoreUnavailableError):
                    await b.sweep()
                await asyncio.sleep(0.05)
        store.down = False

        await b.sweep()  # B's first look since the store came back
        assert run_id not in b._tasks, "taken over on the first look after the outage: the grace was skipped"
    finally:
        release.set()
        await a.aclose()
        await b.aclose()
