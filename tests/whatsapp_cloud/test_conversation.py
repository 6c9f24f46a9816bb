"""A refund asked on the Cloud API, approved by a reply-button tap: the tool runs, the outcome goes back."""

from __future__ import annotations

from . import payloads as p
from .conftest import MakeCloud, thread_of
from .graph import MESSAGES_PATH, TOKEN
from .tools_ import refund_runtime

THREAD = thread_of(p.ALICE)


async def test_refund_approved_by_a_button_tap(make_cloud: MakeCloud) -> None:
    refunded: list[str] = []
    cloud = await make_cloud(refund_runtime(refunded))
    await cloud.say("refund order 1042")
    await cloud.graph.wait_for(lambda g: any(r.json and r.json["type"] == "interactive" for r in g.messages()))
    await cloud.settle()

    (ask,) = cloud.graph.messages()
    assert ask.method == "POST" and ask.path == MESSAGES_PATH
    assert ask.headers["Authorization"] == f"Bearer {TOKEN}"
    assert ask.json is not None
    assert {k: ask.json[k] for k in ("messaging_product", "recipient_type", "to", "type")} == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": p.ALICE,
        "type": "interactive",
    }
    interactive = ask.json["interactive"]
    assert interactive["type"] == "button"
    assert interactive["body"] == {"text": "Refund order 1042?"}
    assert interactive["footer"] == {"text": "Tap a button, or reply *yes* or *no*."}
    buttons = interactive["action"]["buttons"]
    assert [b["type"] for b in buttons] == ["reply", "reply"]
    assert [b["reply"]["title"] for b in buttons] == ["Refund", "Reject"]
    approve, reject = (b["reply"]["id"] for b in buttons)
    assert approve.startswith("agora:") and reject.startswith("agora:") and approve != reject
    runtime = cloud.channel.services.runtime
    (pending,) = await runtime.pending_approvals(THREAD)
    assert pending.tool_call_id not in approve and refunded == []

    response = await cloud.post(p.button_reply(approve, "Refund"))
    assert response.status == 200
    await cloud.graph.wait_for(lambda g: any(t.startswith("Done:") for t in g.texts()))
    await cloud.settle()
    assert refunded == ["1042"]
    assert cloud.graph.texts() == ["✓ Refunded order 1042", "Done: order *1042* is refunded."]
    assert [r.json["type"] for r in cloud.graph.messages() if r.json] == ["interactive", "text", "text"]
    assert all(r.json and r.json["to"] == p.ALICE for r in cloud.graph.messages())
    assert await runtime.pending_approvals(THREAD) == []
    assert await cloud.channel.delivery.state.failures(THREAD) == []
