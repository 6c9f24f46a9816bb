"""A2A messages to a context whose task is working: queued, each its own task once its turn begins."""

from __future__ import annotations

import asyncio
from typing import Any

from a2a.helpers import get_message_text
from a2a.types import GetTaskRequest, TaskState

from gateway import Runtime
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.stores import MemoryStore

from .conftest import WATCHDOG, collect, send_request


class Held:
    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def step(self, request: ModelRequest, index: int) -> ScriptStep:
        if index == 0:
            self.entered.set()
            async with asyncio.timeout(WATCHDOG):
                await self.release.wait()
        return ScriptStep(text=f"answer to {request.last_user_text}")


async def test_a_burst_in_one_context_is_answered_in_order(make_gateway: Any) -> None:
    held = Held()
    gw = await make_gateway(Runtime(model=ScriptedModel(held.step), store=MemoryStore()))
    client = await gw.sdk(streaming=False, polling=True)
    [first] = await collect(client.send_message(send_request("m1", context_id="ctx-burst")))
    assert first.task.status.state == TaskState.TASK_STATE_WORKING
    async with asyncio.timeout(WATCHDOG):
        await held.entered.wait()
    later = [
        asyncio.create_task(collect(client.send_message(send_request(f"m{n}", context_id="ctx-burst")))) for n in (2, 3)
    ]

    async def queued() -> int:
        return len(await gw.runtime.store.queued_messages("ctx-burst"))

    async with asyncio.timeout(WATCHDOG):
        while await queued() < 2:  # both wait in the context's queue, their requests with them
            await asyncio.sleep(0.01)
    held.release.set()
    answers = [(await task)[0].task for task in later]
    tasks = [first.task, *answers]
    assert len({t.id for t in tasks}) == 3 and {t.context_id for t in tasks} == {"ctx-burst"}

    async def final(task_id: str) -> Any:
        async with asyncio.timeout(WATCHDOG):
            while True:
                task = await client.get_task(GetTaskRequest(id=task_id))
                if task.status.state == TaskState.TASK_STATE_COMPLETED:
                    return task
                await asyncio.sleep(0.01)

    done = [await final(t.id) for t in tasks]
    texts = [get_message_text(d.artifacts[-1]) for d in done]
    assert texts == ["answer to m1", "answer to m2", "answer to m3"]
    runs = await gw.runtime.thread_runs("ctx-burst")
    assert [(r.turn.text, r.status) for r in runs] == [("m1", "completed"), ("m2", "completed"), ("m3", "completed")]
    await client.close()
