"""A reconnecting socket's replay is read from the log page by page, and arrives whole and in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway import Runtime, Turn
from gateway.events import RunEvent, RunStartedEvent, TextDeltaEvent
from gateway.models import ScriptedModel, ScriptStep
from gateway.stores import Batch, MemoryStore, RedisStore, RunRecord, SqliteStore, Store, ThreadRecord, _tail

from ..conftest import drop_prefix
from .conftest import ALICE, connect, token_for

EVENTS = 2 * _tail.READ_PAGE + 234
"""More than two pages: the replay crosses two page boundaries and ends inside a page."""


class _Counting:
    """Records the ``limit`` of every log read a store's followers make."""

    limits: list[int | None]

    async def read_events(self, thread_id: str, after_seq: int = 0, limit: int | None = None) -> list[RunEvent]:
        self.limits.append(limit)
        return await super().read_events(thread_id, after_seq, limit)  # type: ignore[misc]


class CountingMemory(_Counting, MemoryStore):
    pass


class CountingRedis(_Counting, RedisStore):
    pass


class CountingSqlite(_Counting, SqliteStore):
    pass


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis), "sqlite"])
async def counting_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    store: Any
    if request.param == "memory":
        store = CountingMemory()
    elif request.param == "sqlite":
        store = CountingSqlite(tmp_path / "agora.db")
    else:
        prefix = f"test-{request.node.name[-8:]}-{id(request) % 100000}"
        store = CountingRedis(request.getfixturevalue("redis_url"), prefix=prefix)
    store.limits = []
    try:
        yield store
    finally:
        await store.aclose()
        if request.param == "redis":
            await drop_prefix(request.getfixturevalue("redis_url"), prefix)


async def _long_thread(store: Store, thread_id: str) -> None:
    """A thread of ALICE's with ``EVENTS`` events (a run's start, then text deltas)."""
    turn = Turn(thread_id=thread_id, actor=ALICE, text="tell me a long story")
    run = RunRecord(run_id="run_long", thread_id=thread_id, agent="default", turn=turn)
    batch = Batch(events=[RunStartedEvent(thread_id=thread_id, run_id=run.run_id, agent="default")])
    thread = ThreadRecord(thread_id=thread_id, owner_id=ALICE.id, channel="web")
    await store.begin_run(run, thread=thread, batch=batch, lease_owner="test", lease_ttl=60)
    ids = {"thread_id": thread_id, "run_id": run.run_id, "message_id": "m1"}
    for start in range(1, EVENTS, 300):
        deltas = [TextDeltaEvent(**ids, delta=f"w{n} ") for n in range(start, min(EVENTS, start + 300))]
        await store.write(thread_id, Batch(events=deltas))
    assert await store.last_seq(thread_id) == EVENTS


@pytest.mark.parametrize("after_seq", [0, _tail.READ_PAGE - 1])
async def test_a_replay_longer_than_a_page_arrives_whole_and_in_order(
    make_client: Any, counting_store: Any, after_seq: int
) -> None:
    await _long_thread(counting_store, "long-thread")
    model = ScriptedModel(lambda request, index: ScriptStep(text="unused"))
    client = await make_client(Runtime(store=counting_store, model=model))
    socket = await connect(client, token=token_for(ALICE))
    welcome = await socket.hello(thread_id="long-thread", after_seq=after_seq)
    assert (welcome["thread_id"], welcome["after_seq"], welcome["restored"]) == ("long-thread", after_seq, True)
    frames = await socket.until(lambda f: f.get("seq") == EVENTS, timeout=30)
    replayed = [f for f in frames if "seq" in f and f["type"] != "welcome"]
    assert [f["seq"] for f in replayed] == list(range(after_seq + 1, EVENTS + 1))
    deltas = [f["delta"] for f in replayed if f["type"] == "text-delta"]
    assert deltas == [f"w{n} " for n in range(max(after_seq, 1), EVENTS)]
    # The follower read the log in pages, never the whole tail at once.
    assert counting_store.limits and all(
        limit is not None and limit <= _tail.READ_PAGE for limit in counting_store.limits
    )
    assert len(counting_store.limits) >= (EVENTS - after_seq) // _tail.READ_PAGE + 1

    # Still live after the replay: the next event comes as it is written.
    run = await counting_store.get_run("run_long")
    event = TextDeltaEvent(thread_id="long-thread", run_id=run.run_id, message_id="m1", delta="live")
    await counting_store.write("long-thread", Batch(events=[event]))
    async with asyncio.timeout(5):
        live = (await socket.until(lambda f: f.get("seq") == EVENTS + 1))[-1]
    assert live["delta"] == "live"
    await socket.ws.close()
