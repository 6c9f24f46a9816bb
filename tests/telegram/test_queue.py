"""Telegram messages that arrive while a run works or waits for an approval: queued, answered in order."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway import Agent, Runtime
from gateway.events import MessageQueuedEvent
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import MemoryStore

from .conftest import MakeGateway, refund_tool, thread_of
from .updates import ALICE_ID, message


class Held:
    """The first answer waits for ``release``; a ``refund`` asks to refund order 1042."""

    def __init__(self, *, hold: bool = True) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.hold = hold
        self.model = ScriptedModel(self.step)

    async def step(self, request: ModelRequest, index: int) -> ScriptStep:
        text = request.last_user_text
        if index == 0 and self.hold:
            self.entered.set()
            async with asyncio.timeout(10):
                await self.release.wait()
        if text.startswith("refund") and request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="refund_order", args={"order_id": "1042"})])
        return ScriptStep(text=f"answer to {text}")


async def test_a_burst_of_five_is_answered_in_order(make_gateway: MakeGateway) -> None:
    held = Held()
    runtime = Runtime(agents=[Agent(name="assistant")], model=held.model, store=MemoryStore())
    gw = await make_gateway(runtime)
    thread = thread_of(ALICE_ID)
    async with asyncio.timeout(2):  # five updates within two seconds, the first one's run still working
        await gw.send(message("m1"))
        await held.entered.wait()
        for n in range(2, 6):
            await gw.send(message(f"m{n}"))
    queued = [e async for e in runtime.events(thread) if isinstance(e, MessageQueuedEvent)]
    assert [e.position for e in queued] == [1, 2, 3, 4]
    held.release.set()
    await gw.bot.wait_for(lambda b: len(b.texts()) >= 5, timeout=15)
    await gw.settle()
    assert gw.bot.texts() == [f"answer to m{n}" for n in range(1, 6)]
    assert [r.status for r in await runtime.thread_runs(thread)] == ["completed"] * 5


async def test_thanks_during_a_pending_refund_sends_the_card_again(make_gateway: MakeGateway) -> None:
    executed: list[str] = []
    held = Held(hold=False)
    runtime = Runtime(
        tools=[refund_tool(executed)], agents=[Agent(name="assistant")], model=held.model, store=MemoryStore()
    )
    gw = await make_gateway(runtime)
    thread = thread_of(ALICE_ID)
    await gw.send(message("refund order 1042"))
    await gw.bot.wait_for(lambda b: any("reply_markup" in c.json for c in b.of("sendMessage")))
    await gw.settle()

    def cards() -> list[Any]:
        return [c for c in gw.bot.of("sendMessage") if "reply_markup" in c.json]

    await gw.send(message("thanks"))
    await gw.bot.wait_for(lambda b: len(cards()) == 2)
    await gw.settle()
    first, again = cards()
    assert again.json["reply_markup"] == first.json["reply_markup"]  # the same single-use buttons
    assert "Got it: I'll answer this once the approval below is decided\\." in gw.bot.texts()
    (pending,) = await runtime.pending_approvals(thread)
    assert pending.status == "pending" and executed == []

    await gw.send(message("yes"))

    async def both_done() -> bool:
        return [r.status for r in await runtime.thread_runs(thread)] == ["completed", "completed"]

    async with asyncio.timeout(10):
        while not await both_done():
            await asyncio.sleep(0.01)
    await gw.settle()
    assert executed == ["1042"]
    assert [r.turn.text for r in await runtime.thread_runs(thread)] == ["refund order 1042", "thanks"]
    assert gw.bot.texts()[-1] == "answer to thanks"
