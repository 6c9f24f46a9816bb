"""Messages that arrive while a run works or waits for an approval, over signed Twilio webhooks."""

from __future__ import annotations

import asyncio

from gateway import Agent, ApprovalPolicy, Runtime
from gateway.events import MessageQueuedEvent
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.stores import MemoryStore

from .conftest import ALICE, BRUNA, MakeGateway, thread_of

THREAD = thread_of(ALICE)


class Held:
    """A model whose first answer waits until ``release`` is set: the thread stays busy meanwhile."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = asyncio.Event()
        self.model = ScriptedModel(self.step)

    async def step(self, request: ModelRequest, index: int) -> ScriptStep:
        if index == 0:
            self.entered.set()
            async with asyncio.timeout(10):
                await self.release.wait()
        return ScriptStep(text=f"answer to {request.last_user_text}")


async def test_a_burst_of_five_in_two_seconds_is_answered_in_order(make_gateway: MakeGateway) -> None:
    held = Held()
    runtime = Runtime(agents=[Agent(name="assistant")], model=held.model, store=MemoryStore())
    gw = await make_gateway(runtime)
    async with asyncio.timeout(2):  # five webhooks within two seconds, the first one's run still working
        await gw.say("m1")
        await held.entered.wait()
        for n in range(2, 6):
            await gw.say(f"m{n}")
    queued = [e async for e in runtime.events(THREAD) if isinstance(e, MessageQueuedEvent)]
    assert [(e.text, e.position) for e in queued] == [("m2", 1), ("m3", 2), ("m4", 3), ("m5", 4)]
    assert gw.http.bodies() == []  # nothing said while queued behind a running run: the answers follow
    held.release.set()
    await gw.http.wait_for(lambda h: len(h.bodies()) >= 5, timeout=15)
    await gw.settle()
    assert gw.http.bodies() == [f"answer to m{n}" for n in range(1, 6)]
    assert [r.status for r in await runtime.thread_runs(THREAD)] == ["completed"] * 5


async def test_thanks_during_a_pending_refund_leaves_it_pending(make_gateway: MakeGateway) -> None:
    gw = await make_gateway()
    runtime = gw.channel.services.runtime
    await gw.say("refund order 1042")
    await gw.http.wait_messages(1)
    await gw.settle()
    cards = [r for r in gw.http.messages() if "ContentSid" in r.data]
    assert len(cards) == 1
    (pending,) = await runtime.pending_approvals(THREAD)

    await gw.say("thanks")
    await gw.settle()
    # Reminded what waits, with the same approval card (the same single-use buttons) again.
    assert "Got it: I'll answer this once the approval below is decided." in gw.http.bodies()
    again = [r for r in gw.http.messages() if "ContentSid" in r.data]
    assert len(again) == 2 and again[1].data["ContentVariables"] == cards[0].data["ContentVariables"]
    assert [a.tool_call_id for a in await runtime.pending_approvals(THREAD)] == [pending.tool_call_id]
    assert [r.status for r in await runtime.thread_runs(THREAD)] == ["awaiting-approval"]

    await gw.say("yes")
    await gw.http.wait_for(lambda h: any(b.startswith("Done:") for b in h.bodies()))

    async def two_done() -> list[str]:
        runs = await runtime.thread_runs(THREAD)
        return [r.status for r in runs]

    async with asyncio.timeout(10):
        while await two_done() != ["completed", "completed"]:
            await asyncio.sleep(0.01)
    await gw.settle()
    approval = await runtime.get_approval(pending.tool_call_id)
    assert (approval.status, approval.via) == ("approved", "whatsapp")
    runs = await runtime.thread_runs(THREAD)
    assert [r.turn.text for r in runs] == ["refund order 1042", "thanks"]
    done_at = next(i for i, b in enumerate(gw.http.bodies()) if b.startswith("Done:"))
    assert len(gw.http.bodies()) > done_at + 1  # the thanks is answered after the refund's outcome


async def test_portuguese_reminder_and_a_typed_cancelar(make_gateway: MakeGateway) -> None:
    gw = await make_gateway()
    runtime = gw.channel.services.runtime
    thread = thread_of(BRUNA)
    await gw.say("refund order 1042", number=BRUNA)
    await gw.http.wait_messages(1)
    await gw.settle()
    await gw.say("obrigada", number=BRUNA)
    await gw.settle()
    assert "Entendido: respondo assim que a aprovação abaixo for decidida." in gw.http.bodies()
    (pending,) = await runtime.pending_approvals(thread)
    await gw.say("cancelar", number=BRUNA)
    await gw.settle()
    assert "Parei." in gw.http.bodies()
    approval = await runtime.get_approval(pending.tool_call_id)
    assert (approval.status, approval.via) == ("rejected", "cancelled")

    async def statuses() -> list[str]:
        return [r.status for r in await runtime.thread_runs(thread)]

    async with asyncio.timeout(10):
        while await statuses() != ["cancelled", "completed"]:
            await asyncio.sleep(0.01)
    assert [r.turn.text for r in await runtime.thread_runs(thread)] == ["refund order 1042", "obrigada"]


async def test_supersede_keeps_the_old_behaviour(make_gateway: MakeGateway) -> None:
    gw = await make_gateway()
    runtime = gw.channel.services.runtime
    runtime.approval_policy = ApprovalPolicy(on_new_message="supersede")
    await gw.say("refund order 1042")
    await gw.http.wait_messages(1)
    await gw.settle()
    (pending,) = await runtime.pending_approvals(THREAD)
    await gw.say("thanks")
    await gw.settle()
    approval = await runtime.get_approval(pending.tool_call_id)
    assert (approval.status, approval.via) == ("rejected", "superseded")
    assert not any("approval below" in b for b in gw.http.bodies())


async def test_a_full_queue_is_refused_in_words(make_gateway: MakeGateway) -> None:
    held = Held()
    runtime = Runtime(agents=[Agent(name="assistant", queue_limit=1)], model=held.model, store=MemoryStore())
    gw = await make_gateway(runtime)
    await gw.say("m1")
    await held.entered.wait()
    await gw.say("m2")
    await gw.say("m3")
    await gw.http.wait_for(lambda h: len(h.bodies()) >= 1)
    assert gw.http.bodies() == ["Many of your messages are still waiting: let me answer them before you send more."]
    held.release.set()
    await gw.http.wait_for(lambda h: len(h.bodies()) >= 3, timeout=15)
    await gw.settle()
    assert gw.http.bodies()[1:] == ["answer to m1", "answer to m2"]
