"""Staff approvers on WhatsApp: a refund that needs role ``staff`` goes to a staff number, with buttons."""

from __future__ import annotations

from gateway import SERVICES, Agent, ApprovalPolicy, ApprovalRule, Branding, Runtime
from gateway.demo import DemoModel, demo_tools
from gateway.events import ToolCompletedEvent

from .conftest import ALICE, BRUNA, SECRET, Gateway, MakeGateway, Recorded, button, thread_of

STAFF = "+15551239999"
"""A staff member's number: ``AGORA_WHATSAPP_ROLES="+15551239999=staff"``."""
SUPPORT = "+15551238888"
"""A number with a role that decides nothing here."""
ROLES = {STAFF: ["staff"], SUPPORT: ["support"]}
OTHER = "+15551237777"


def staff_runtime() -> Runtime:
    return Runtime(
        tools=demo_tools(SECRET.encode()),
        agents=[Agent(name="assistant", instructions="Demo.")],
        model=DemoModel(),
        approval_policy=ApprovalPolicy(rules={"refund_order": ApprovalRule(approver="staff")}),
    )


def cards(gw: Gateway, number: str) -> list[Recorded]:
    return [r for r in gw.http.messages() if "ContentSid" in r.data and r.data["To"] == f"whatsapp:{number}"]


def bodies_to(gw: Gateway, number: str) -> list[str]:
    return [
        str(r.data["Body"]) for r in gw.http.messages() if r.data["To"] == f"whatsapp:{number}" and "Body" in r.data
    ]


async def refunds(runtime: Runtime, thread_id: str) -> list[ToolCompletedEvent]:
    return [
        e async for e in runtime.events(thread_id) if isinstance(e, ToolCompletedEvent) and e.tool == "refund_order"
    ]


async def test_a_staff_number_gets_the_buttons_and_its_tap_completes_the_customers_run(
    make_gateway: MakeGateway,
) -> None:
    runtime = staff_runtime()
    gw = await make_gateway(runtime, whatsapp_roles=ROLES)
    # The staff member wrote in the last 24 h (the customer-service window is open for them too).
    await gw.say("hi", number=STAFF)
    await gw.http.wait_for(lambda h: bool(bodies_to(gw, STAFF)))
    await gw.settle()
    customer = thread_of(ALICE)

    await gw.say("refund order 1042")
    await gw.http.wait_for(lambda h: bool(cards(gw, STAFF)))
    await gw.settle()
    # The customer: told who decides, no buttons. The staff: the card, with who asked.
    assert cards(gw, ALICE) == []
    assert bodies_to(gw, ALICE) == ["Waiting for a person at Assistant to approve: Refund €129.00 for order 1042?"]
    (card,) = cards(gw, STAFF)
    assert card.variables["1"] == "Refund €129.00 for order 1042?"
    assert card.variables["2"].endswith(f"Asked by whatsapp:{ALICE} (whatsapp).")
    assert cards(gw, SUPPORT) == []
    assert "5" not in card.variables  # no "Always" where a role decides (four eyes)
    approve, reject = card.variables["3"], card.variables["4"]

    # Someone else taps the staff's button (the customer, a number of another role): not theirs.
    for number in (ALICE, SUPPORT):
        await gw.post(button(approve, "Refund", number=number))
        await gw.settle()
        assert bodies_to(gw, number)[-1] == "That button is not for you."
    (pending,) = await runtime.pending_approvals(customer)
    assert pending.status == "pending"

    # The staff member taps: the customer's run completes, once; they are told the outcome.
    assert (await gw.post(button(approve, "Refund", number=STAFF))).status == 200
    await gw.http.wait_for(lambda h: any(b.startswith("Done:") for b in bodies_to(gw, ALICE)), timeout=30)
    await gw.settle()
    said = bodies_to(gw, ALICE)
    assert said[2:4] == ["A person at Assistant approved: Refund €129.00 for order 1042?", "✓ Refunded order 1042"]
    assert said[-1].startswith("Done:")
    assert len(await refunds(runtime, customer)) == 1
    runs = await runtime.thread_runs(customer)
    assert [r.status for r in runs] == ["completed"]

    # A second tap, of either button: already decided, nothing runs twice.
    await gw.post(button(reject, "Reject", number=STAFF))
    await gw.settle()
    assert bodies_to(gw, STAFF)[-1] == "That was already decided."
    assert len(await refunds(runtime, customer)) == 1


async def test_a_rejection_by_staff_in_portuguese(make_gateway: MakeGateway) -> None:
    runtime = staff_runtime()
    gw = await make_gateway(runtime, whatsapp_roles=ROLES)
    gw.app[SERVICES].branding = Branding(name="Loja")  # as AGORA_BRAND_NAME=Loja would
    await gw.say("oi", number=STAFF)
    await gw.http.wait_for(lambda h: bool(bodies_to(gw, STAFF)))
    await gw.settle()
    await gw.say("refund order 1042", number=BRUNA)
    await gw.http.wait_for(lambda h: bool(cards(gw, STAFF)))
    await gw.settle()
    assert bodies_to(gw, BRUNA) == ["Aguardando uma pessoa da Loja aprovar: Refund €129.00 for order 1042?"]
    await gw.post(button(cards(gw, STAFF)[0].variables["4"], "Reject", number=STAFF))
    await gw.http.wait_for(lambda h: len(bodies_to(gw, BRUNA)) >= 3, timeout=30)
    await gw.settle()
    assert bodies_to(gw, BRUNA)[1] == "Uma pessoa da Loja recusou: Refund €129.00 for order 1042?", bodies_to(gw, BRUNA)
    assert await refunds(runtime, thread_of(BRUNA)) == []


async def test_yes_always_approves_and_remembers_sim_sempre_too(make_gateway: MakeGateway) -> None:
    runtime = Runtime(
        tools=demo_tools(SECRET.encode()),
        agents=[Agent(name="assistant", instructions="Demo.")],
        model=DemoModel(),
    )
    gw = await make_gateway(runtime)
    for number, words in ((ALICE, "yes always"), (BRUNA, "sim sempre"), (OTHER, "always")):
        await gw.say("refund order 1042", number=number)
        await gw.http.wait_for(lambda h, n=number: bool(cards(gw, n)))
        await gw.settle()
        if words == "always":  # the third button, "Always", rather than words
            await gw.post(button(cards(gw, number)[0].variables["5"], "Always", number=number))
        else:
            await gw.say(words, number=number)
        await gw.http.wait_for(
            lambda h, n=number: any(b.startswith("✓ Refunded") for b in bodies_to(gw, n)), timeout=30
        )
        await gw.settle()
        (approval,) = [a for a in await runtime.store.thread_approvals(thread_of(number))]
        assert (approval.status, approval.remember) == ("approved", True)
        # The next refund in the thread runs without asking.
        await gw.say("refund order 1041", number=number)
        await gw.http.wait_for(lambda h, n=number: len(refunds_said(gw, n)) == 2, timeout=30)
        await gw.settle()
        assert len(cards(gw, number)) == 1
        assert len(await refunds(runtime, thread_of(number))) == 2


def refunds_said(gw: Gateway, number: str) -> list[str]:
    return [b for b in bodies_to(gw, number) if b.startswith("✓ Refunded")]


async def test_yes_always_is_refused_where_a_role_decides(make_gateway: MakeGateway) -> None:
    # The customer holds the role that decides refunds (``member``, everyone's default): they may
    # decide, but a role's approval is never remembered (four eyes), so "yes always" decides nothing.
    runtime = Runtime(
        tools=demo_tools(SECRET.encode()),
        agents=[Agent(name="assistant", instructions="Demo.")],
        model=DemoModel(),
        approval_policy=ApprovalPolicy(rules={"refund_order": ApprovalRule(approver="member")}),
    )
    gw = await make_gateway(runtime)
    await gw.say("refund order 1042")
    await gw.http.wait_for(lambda h: bool(bodies_to(gw, ALICE)))
    await gw.settle()
    await gw.say("yes always")
    await gw.http.wait_for(lambda h: len(bodies_to(gw, ALICE)) >= 2)
    await gw.settle()
    assert bodies_to(gw, ALICE)[-1] == (
        "That cannot be remembered: each one needs a person's decision. Reply *yes* or *no*."
    )
    (pending,) = await runtime.pending_approvals(thread_of(ALICE))
    assert pending.status == "pending" and await refunds(runtime, thread_of(ALICE)) == []
    await gw.say("yes")
    await gw.http.wait_for(lambda h: any(b.startswith("✓ Refunded") for b in bodies_to(gw, ALICE)), timeout=30)
