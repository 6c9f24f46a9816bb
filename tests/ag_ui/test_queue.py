"""AG-UI requests to a busy thread: queued, each streamed as a well-formed run once its turn begins."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway import SERVICES

from .conftest import Client, Frame, Shop, new_id, parse_sse, post, run_input, types


async def read(response: Any) -> list[Frame]:
    assert response.status == 200
    async with asyncio.timeout(10):
        return parse_sse(await response.text())


async def test_a_burst_to_a_busy_thread_streams_each_turn_in_order(client: Client, shop: Shop) -> None:
    runtime = client.app[SERVICES].runtime
    thread_id = new_id("t")
    first = await post(client, run_input(thread_id, "slow report please", run_id="r-1"))
    await shop.entered.wait()
    second = await post(client, run_input(thread_id, "hello there", run_id="r-2"))
    third = await post(client, run_input(thread_id, "weather please", run_id="r-3"))
    shop.gate.set()
    streams = [await read(first), await read(second), await read(third)]

    assert types(streams[0])[0] == "RUN_STARTED" and types(streams[0])[-1] == "RUN_FINISHED"
    for frames, run_id, position in ((streams[1], "r-2", 1), (streams[2], "r-3", 2)):
        kinds = types(frames)
        # One well-formed run: RUN_STARTED (the client's runId), its place in the queue, then the
        # turn's own run as it begins, through RUN_FINISHED; nothing of the run ahead of it.
        assert kinds[:2] == ["RUN_STARTED", "CUSTOM agora.message-queued"]
        assert kinds[-1] == "RUN_FINISHED" and kinds.count("RUN_STARTED") == 1
        assert frames[0].data["runId"] == frames[-1].data["runId"] == run_id
        assert frames[1].data["value"]["position"] == position
        assert "CUSTOM agora.message-dequeued" in kinds
        ids = [f.id for f in frames]
        assert ids == sorted(ids)
    texts = ["".join(f.data["delta"] for f in s if f.type == "TEXT_MESSAGE_CONTENT") for s in streams]
    assert texts == ["Report ready.", "Hello from the gateway.", "Sunny in Lisbon."]
    runs = await runtime.thread_runs(thread_id)
    assert [(r.turn.text, r.status) for r in runs] == [
        ("slow report please", "completed"),
        ("hello there", "completed"),
        ("weather please", "completed"),
    ]


async def test_a_queued_turn_removed_before_it_runs_ends_its_stream(client: Client, shop: Shop) -> None:
    runtime = client.app[SERVICES].runtime
    thread_id = new_id("t")
    first = await post(client, run_input(thread_id, "slow report please"))
    await shop.entered.wait()
    second = await post(client, run_input(thread_id, "never mind", run_id="r-2"))
    (queued,) = await runtime.store.queued_messages(thread_id)
    owner = (await runtime.thread_runs(thread_id))[0].turn.actor
    await runtime.queue.remove(queued.message_id, owner)
    frames = await read(second)
    assert types(frames) == ["RUN_STARTED", "CUSTOM agora.message-queued", "RUN_ERROR"]
    assert frames[-1].data["code"] == "message_removed"
    shop.gate.set()
    assert types(await read(first))[-1] == "RUN_FINISHED"
    assert [r.turn.text for r in await runtime.thread_runs(thread_id)] == ["slow report please"]
