"""A Sentinel failover under a running gateway process: real master, replica and three sentinels.

The process keeps its ``RedisStore`` (built from the Sentinel URL) across the failover, as a
running gateway would: no reconnection by hand, no new store.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from gateway import Runtime, Turn
from gateway.events import RunFinishedEvent
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import RedisStore
from tools import Actor, ToolContext, define_tool

from ._helpers import begin, thread_of
from ._server import SentinelCluster

TURNS = 200
KILL_AT = 100
"""The turn whose tool call kills the master: the turn in flight across the failover."""


class TurnInput(BaseModel):
    turn: int


def plan(request: ModelRequest, index: int) -> ScriptStep:
    """Step 0 calls the counting tool with the turn's number, step 1 answers."""
    if request.step == 0:
        turn = int(request.last_user_text.removeprefix("turn "))
        return ScriptStep(tool_calls=[ToolCallRequest(name="count_turn", args={"turn": turn})])
    return ScriptStep(text="Counted.")


@pytest.fixture
async def cluster(tmp_path: Path) -> Any:
    own = SentinelCluster(tmp_path)
    try:
        await own.start()
        yield own
    finally:
        own.stop()


async def test_a_running_process_follows_the_master_across_a_sentinel_failover(cluster: SentinelCluster) -> None:
    loop = asyncio.get_running_loop()
    calls: Counter[int] = Counter()
    moments: dict[str, float] = {}
    promotion: list[asyncio.Task[None]] = []

    async def promoted() -> None:
        await cluster.promoted()
        moments["promoted"] = loop.time()

    @define_tool(name="count_turn", description="Counts its calls, per turn.", input=TurnInput)
    async def count_turn(input: TurnInput, ctx: ToolContext) -> dict[str, int]:
        calls[input.turn] += 1
        if input.turn == KILL_AT and not promotion:
            await cluster.kill_master()
            moments["killed"] = loop.time()
            promotion.append(asyncio.create_task(promoted()))
        return {"turn": input.turn}

    store = RedisStore(cluster.url, prefix="failover")
    runtime = Runtime(tools=[count_turn], model=ScriptedModel(plan), store=store)
    statuses: list[str] = []
    try:
        for turn in range(TURNS):
            run_id = await runtime.start_turn(Turn(thread_id="t-failover", actor=Actor(id="u1"), text=f"turn {turn}"))
            statuses.append(await runtime.wait(run_id, timeout=30 if turn == KILL_AT else 10))
            if turn == KILL_AT:
                moments["recovered"] = loop.time()
                async with asyncio.timeout(30):
                    await promotion[0]
        events = await store.read_events("t-failover")
    finally:
        for task in promotion:
            task.cancel()
        await runtime.aclose()
        await store.aclose()

    failover = moments["promoted"] - moments["killed"]
    after = moments["recovered"] - moments["promoted"]
    print(f"\n{TURNS} turns; master promoted {failover:.2f} s after the kill; in-flight turn done {after:.2f} s later")
    assert statuses == ["completed"] * TURNS
    assert after < 5.0, "the turn in flight completes within seconds of the failover"
    assert [event.seq for event in events] == list(range(1, len(events) + 1)), "no event lost"
    finished = [event for event in events if isinstance(event, RunFinishedEvent)]
    assert len(finished) == TURNS and {event.status for event in finished} == {"completed"}
    assert [event.type for event in events].count("run-started") == TURNS
    assert calls == Counter(range(TURNS)), "each turn's tool ran once"


async def test_the_first_calls_after_a_failover_reach_the_new_master(cluster: SentinelCluster) -> None:
    """Connections left idle on the old master reconnect through the sentinels within the call itself."""
    store = RedisStore(cluster.url, prefix="idle-failover")
    try:
        threads = [f"t-{index}" for index in range(8)]
        await asyncio.gather(*(store.ensure_thread(thread_of(thread_id)) for thread_id in threads))
        await asyncio.gather(*(store.last_seq(thread_id) for thread_id in threads))  # several connections idle
        await cluster.kill_master()
        await cluster.promoted()
        found = await asyncio.gather(*(store.get_thread(thread_id) for thread_id in threads))
        assert [thread.thread_id if thread else None for thread in found] == threads
        _, events = await begin(store, "t-after")  # a write (a script) too
        assert [event.seq for event in events] == [1]
    finally:
        await store.aclose()
