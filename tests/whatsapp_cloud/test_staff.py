"""Staff approvers on the Cloud API: a refund that needs role ``staff`` goes to the staff number's chat."""

from __future__ import annotations

from gateway import Agent, ApprovalPolicy, ApprovalRule, Runtime
from gateway.demo import DemoModel, demo_tools
from gateway.events import ToolCompletedEvent
from tests.whatsapp_cloud.graph import Graph

from . import payloads as p
from .conftest import SECRET, MakeCloud, thread_of

STAFF = "15551239999"
"""A staff member's number: ``AGORA_WHATSAPP_ROLES="+15551239999=staff"``."""


def cards_to(graph: Graph, number: str) -> list[dict[str, object]]:
    return [r.json for r in graph.messages() if r.json and r.json["type"] == "interactive" and r.json["to"] == number]


def texts_to(graph: Graph, number: str) -> list[str]:
    return [
        str(r.json["text"]["body"])
        for r in graph.messages()
        if r.json and r.json["type"] == "text" and r.json["to"] == number
    ]


async def test_the_staff_number_gets_the_card_and_its_tap_completes_the_customers_run(make_cloud: MakeCloud) -> None:
    from channels.whatsapp import WhatsAppSenderOptions

    runtime = Runtime(
        tools=demo_tools(SECRET.encode()),
        agents=[Agent(name="assistant", instructions="Demo.")],
        model=DemoModel(),
        approval_policy=ApprovalPolicy(rules={"refund_order": ApprovalRule(approver="staff")}),
    )
    customer = thread_of(p.ALICE)

    async def refunds() -> int:
        events = [e async for e in runtime.events(customer)]
        return sum(isinstance(e, ToolCompletedEvent) and e.tool == "refund_order" for e in events)

    senders = WhatsAppSenderOptions(_env_file=None, roles={f"+{STAFF}": ["staff"]})  # type: ignore[call-arg]
    cloud = await make_cloud(runtime, senders=senders)
    await cloud.say("hi", number=STAFF)  # the staff's 24 h window is open
    await cloud.settle()

    await cloud.say("refund order 1042")
    await cloud.graph.wait_for(lambda g: bool(cards_to(g, STAFF)))
    await cloud.settle()
    assert cards_to(cloud.graph, p.ALICE) == [], "the customer gets no buttons that are not theirs"
    assert texts_to(cloud.graph, p.ALICE) == [
        "Waiting for a person at Assistant to approve: Refund €129.00 for order 1042?"
    ]
    (card,) = cards_to(cloud.graph, STAFF)
    interactive = card["interactive"]
    assert isinstance(interactive, dict)
    assert interactive["body"]["text"].startswith("Refund €129.00 for order 1042?")
    assert f"Asked by whatsapp:+{p.ALICE} (whatsapp" in interactive["body"]["text"]
    buttons = interactive["action"]["buttons"]
    assert [b["reply"]["title"] for b in buttons] == ["Refund", "Reject"]  # no "Always" where a role decides
    approve = buttons[0]["reply"]["id"]

    await cloud.post(p.button_reply(approve, "Refund"))  # the customer taps the staff's button: not theirs
    await cloud.settle()
    assert texts_to(cloud.graph, p.ALICE)[-1] == "That button is not for you."
    assert await refunds() == 0
    (pending,) = await runtime.pending_approvals(customer)
    assert pending.status == "pending"

    await cloud.post(p.button_reply(approve, "Refund", number=STAFF))
    await cloud.graph.wait_for(lambda g: any(t.startswith("Done:") for t in texts_to(g, p.ALICE)), timeout=30)
    await cloud.settle()
    assert await refunds() == 1
    said = texts_to(cloud.graph, p.ALICE)
    assert "A person at Assistant approved: Refund €129.00 for order 1042?" in said
    assert "✓ Refunded order 1042" in said
    assert [r.status for r in await runtime.thread_runs(customer)] == ["completed"]
