"""Whole conversations over WhatsApp with the demo model and tools: signed webhooks in, Twilio out."""

from __future__ import annotations

import asyncio
import io
from typing import Any

from PIL import Image

from channels.whatsapp import BUTTON_PREFIX
from gateway import Agent, Runtime, sign_actor_token
from gateway.demo import DemoModel, demo_tools
from gateway.events import ToolCompletedEvent
from gateway.stores import MemoryStore
from tools import Actor

from .conftest import (
    ALICE,
    BRUNA,
    CONTENT_URL,
    FROM,
    MEDIA,
    PUBLIC,
    SECRET,
    Gateway,
    MakeGateway,
    Recorded,
    button,
    thread_of,
)

THREAD = thread_of(ALICE)


def approval_message(gw: Gateway) -> Recorded:
    found = [r for r in gw.http.messages() if "ContentSid" in r.data]
    assert len(found) == 1, found
    return found[0]


async def refunds(gw: Gateway, thread_id: str = THREAD) -> list[ToolCompletedEvent]:
    runtime = gw.channel.services.runtime
    return [
        e async for e in runtime.events(thread_id) if isinstance(e, ToolCompletedEvent) and e.tool == "refund_order"
    ]


async def test_refund_from_request_to_receipt_image(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(options=MEDIA)
    response = await gw.say("refund order 1042")
    assert response.headers["Content-Type"].startswith("text/xml")
    assert await response.text() == '<?xml version="1.0" encoding="UTF-8"?><Response></Response>'

    # The approval: one quick-reply template for this text shape, then the message filling it.
    await gw.http.wait_messages(1)
    templates = [r for r in gw.http.requests if r.url == CONTENT_URL]
    assert len(templates) == 1
    assert templates[0].headers["Content-Type"] == "application/json"
    quick_reply = templates[0].data["types"]["twilio/quick-reply"]
    assert [a["title"] for a in quick_reply["actions"]] == ["Refund", "Reject", "Always"]
    assert [a["id"] for a in quick_reply["actions"]] == ["{{3}}", "{{4}}", "{{5}}"]
    assert "reply *yes* or *no*" in templates[0].data["types"]["twilio/text"]["body"]
    request = approval_message(gw)
    assert request.data["To"] == f"whatsapp:{ALICE}"
    assert request.data["From"] == FROM
    assert request.data["ContentSid"] == "HX" + "1".zfill(32)
    assert request.data["StatusCallback"] == f"{PUBLIC}/channels/whatsapp/status"
    assert "Body" not in request.data and "MediaUrl" not in request.data
    variables = request.variables
    assert variables["1"] == "Refund €129.00 for order 1042?"
    assert variables["2"] == "Burr grinder · back to the card ending 4242"
    approve, reject, always = variables["3"], variables["4"], variables["5"]
    assert approve.startswith(BUTTON_PREFIX) and reject.startswith(BUTTON_PREFIX) and approve != reject
    assert always.startswith(BUTTON_PREFIX) and always not in (approve, reject)
    pending = await gw.channel.services.runtime.pending_approvals(THREAD)
    assert len(pending) == 1 and pending[0].tool_call_id not in approve  # opaque: names nothing

    # The tap: the refund runs, its narration, receipt card and the agent's words follow.
    assert (await gw.post(button(approve, "Refund"))).status == 200
    await gw.http.wait_for(lambda h: any(b.startswith("Done:") for b in h.bodies()), timeout=30)
    await gw.settle()
    sent = gw.http.messages()
    assert [r.data.get("Body") for r in sent[1:]] == [
        "✓ Refunded order 1042",
        "Refund receipt: €129.00 for order 1042",
        "Done: €129.00 for order 1042 is on its way back to your card.",
    ]
    receipt = sent[2]
    (url,) = receipt.data["MediaUrl"]
    assert url.startswith(f"{PUBLIC}/media/")
    media = await gw.client.get(url.removeprefix(PUBLIC))
    assert media.status == 200 and media.content_type == "image/png"
    image = Image.open(io.BytesIO(await media.read()))
    image.load()
    assert image.format == "PNG" and image.width > 100 and image.height > 50
    assert len(await refunds(gw)) == 1

    # The same button again, or the other one: politely refused, nothing runs twice.
    await gw.post(button(approve, "Refund"))
    await gw.post(button(reject, "Reject"))
    await gw.settle()
    assert gw.http.bodies()[-2:] == ["That was already decided.", "That was already decided."]
    assert len(await refunds(gw)) == 1
    assert len([r for r in gw.http.requests if r.url == CONTENT_URL]) == 1

    # A document is a PDF: one media message with its text as caption.
    await gw.say("invoice for order 1042")
    await gw.http.wait_for(lambda h: any(b.startswith("Here is invoice") for b in h.bodies()), timeout=30)
    await gw.settle()
    invoice = next(r for r in gw.http.messages() if r.data.get("Body", "").startswith("Invoice INV-1042"))
    (url,) = invoice.data["MediaUrl"]
    document = await gw.client.get(url.removeprefix(PUBLIC))
    assert document.content_type == "application/pdf" and (await document.read()).startswith(b"%PDF")


async def test_an_approval_requested_on_whatsapp_is_decided_on_the_web_of_another_process(
    make_gateway: MakeGateway,
) -> None:
    """Two gateway processes share one store; the web decision lands on the second one."""
    store = MemoryStore()

    def runtime() -> Runtime:
        agent = Agent(name="assistant", instructions="Demo.")
        return Runtime(tools=demo_tools(SECRET.encode()), agents=[agent], model=DemoModel(), store=store)

    first = await make_gateway(runtime(), options=MEDIA)
    second = await make_gateway(runtime(), options=MEDIA)
    await first.say("refund order 1042")
    await first.http.wait_messages(1)
    await first.settle()
    (pending,) = await store.pending_approvals(THREAD)

    actor = Actor(id=f"whatsapp:{ALICE}", roles=["member"])
    response = await second.client.post(
        "/agent/tool-call/approve",
        json={"tool_call_id": pending.tool_call_id},
        headers={"Authorization": f"Bearer {sign_actor_token(actor, SECRET)}"},
    )
    assert response.status == 200, await response.text()
    assert (await response.json())["status"] == "approved"

    await second.http.wait_for(lambda h: any(b.startswith("Done:") for b in h.bodies()), timeout=30)
    await second.settle()
    sent = second.http.messages()
    assert [r.data["To"] for r in sent] == [f"whatsapp:{ALICE}"] * 4
    assert [r.data.get("Body") for r in sent] == [
        "Approved (on the web).",
        "✓ Refunded order 1042",
        "Refund receipt: €129.00 for order 1042",
        "Done: €129.00 for order 1042 is on its way back to your card.",
    ]
    assert sent[2].data["MediaUrl"][0].startswith(f"{PUBLIC}/media/")
    # The first process sent the request only; nothing twice on either side.
    assert len(first.http.messages()) == 1
    cursor = await second.channel.state.cursor(THREAD)
    assert cursor is not None and cursor.seq == await store.last_seq(THREAD) and cursor.part == 0


async def test_yes_and_no_as_text(make_gateway: MakeGateway) -> None:
    gw = await make_gateway()
    await gw.say("refund order 1042")
    await gw.http.wait_messages(1)
    await gw.settle()
    await gw.say("Yes")
    await gw.http.wait_for(lambda h: any(b.startswith("Done:") for b in h.bodies()))
    await gw.settle()
    runtime = gw.channel.services.runtime
    settled = [e async for e in runtime.events(THREAD) if e.type == "approval-settled"]
    assert [(e.status, e.decided_by, e.via) for e in settled] == [("approved", f"whatsapp:{ALICE}", "whatsapp")]

    count = len(gw.http.messages())
    await gw.say("refund order 1041")
    await gw.http.wait_messages(count + 1)
    await gw.settle()
    await gw.say("no")
    await gw.http.wait_for(lambda h: any("did not go ahead" in b for b in h.bodies()))
    await gw.settle()
    assert len(await refunds(gw)) == 1

    # A number with nothing waiting is answered; a bare "yes" is an ordinary message.
    await gw.say("yes 2")
    await gw.settle()
    assert gw.http.bodies()[-1] == "Nothing is waiting for your answer."
    runs = len(await runtime.store.thread_runs(THREAD))
    await gw.say("yes")
    await gw.settle()
    assert len(await runtime.store.thread_runs(THREAD)) == runs + 1


async def test_buttons_of_someone_else_settled_or_expired(make_gateway: MakeGateway) -> None:
    gw = await make_gateway()
    await gw.say("refund order 1042")
    await gw.http.wait_messages(1)
    await gw.settle()
    approve = approval_message(gw).variables["3"]

    # Bruna (a Brazilian number: Portuguese) taps Alice's button: refused, nothing decided.
    await gw.post(button(approve, "Refund", number=BRUNA))
    await gw.settle()
    last = gw.http.messages()[-1]
    assert (last.data["To"], last.data["Body"]) == (f"whatsapp:{BRUNA}", "Esse botão não é para você.")
    assert len(await gw.channel.services.runtime.pending_approvals(THREAD)) == 1

    # A forged payload reads as expired; a replayed webhook does nothing at all.
    await gw.post(button(BUTTON_PREFIX + "forged-token", "Refund"))
    await gw.settle()
    assert gw.http.bodies()[-1] == "That approval has expired."
    fields = button(approve, "Refund")
    await gw.post(fields)
    await gw.settle()
    count = len(gw.http.requests)
    replay = await gw.post(fields)
    await gw.settle()
    assert replay.status == 200 and len(gw.http.requests) == count
    assert len(await refunds(gw)) == 1


async def test_an_expired_approval(make_gateway: MakeGateway) -> None:
    from gateway import ApprovalPolicy, ApprovalRule

    agent = Agent(name="assistant", instructions="Demo.")
    runtime = Runtime(
        tools=demo_tools(SECRET.encode()),
        agents=[agent],
        model=DemoModel(),
        approval_policy=ApprovalPolicy(default=ApprovalRule(ttl=0.001)),
    )
    gw = await make_gateway(runtime)
    await gw.say("refund order 1042")
    await gw.http.wait_messages(1)
    await gw.settle()
    (pending,) = await runtime.pending_approvals(THREAD)
    async with asyncio.timeout(5):
        while not pending.lapsed():  # its 1 ms ttl runs on the real clock
            await asyncio.sleep(0.001)
    await gw.post(button(approval_message(gw).variables["3"], "Refund"))
    await gw.http.wait_for(lambda h: "That approval has expired." in h.bodies())
    said = "I did not go ahead. The approval request expired before anyone decided."
    await gw.http.wait_for(lambda h: said in h.bodies())  # the model was told, and said so
    await gw.settle()
    assert "The approval “Refund €129.00 for order 1042?” has expired." in gw.http.bodies()
    assert await refunds(gw) == []


async def test_portuguese_for_brazilian_numbers(make_gateway: MakeGateway) -> None:
    gw = await make_gateway()
    await gw.say("refund order 1042", number=BRUNA)
    await gw.http.wait_messages(1)
    await gw.settle()
    (template,) = [r for r in gw.http.requests if r.url == CONTENT_URL]
    assert template.data["language"] == "pt_BR"
    quick_reply = template.data["types"]["twilio/quick-reply"]
    assert [a["title"] for a in quick_reply["actions"]] == ["Refund", "Recusar", "Sempre"]
    assert quick_reply["body"].endswith("Toque num botão, ou responda *sim* ou *não*.")
    await gw.say("sim", number=BRUNA)
    await gw.http.wait_for(lambda h: any(b.startswith("Done:") for b in h.bodies()))


async def test_whatsapp_languages_setting_wins(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(whatsapp_languages=f"{ALICE}=pt-BR")
    await gw.say("yes 3")
    await gw.settle()
    assert gw.http.bodies() == ["Nada está aguardando a sua resposta."]


async def test_thread_per_sender_and_history_on_the_web(make_gateway: MakeGateway) -> None:
    gw = await make_gateway()
    await gw.say("weather in Lisbon")
    await gw.http.wait_for(lambda h: any("Lisbon" in b and "°C" in b for b in h.bodies()))
    await gw.settle()
    actor = Actor(id=f"whatsapp:{ALICE}", roles=["member"])
    response = await gw.client.get(
        f"/agent/threads/{THREAD}", headers={"Authorization": f"Bearer {sign_actor_token(actor, SECRET)}"}
    )
    history = await response.json()
    assert response.status == 200 and history["owner_id"] == f"whatsapp:{ALICE}"
    assert history["messages"][0]["content"] == "weather in Lisbon"
    runs = await gw.channel.services.runtime.store.thread_runs(THREAD)
    assert runs[0].turn.channel == "whatsapp"
    assert runs[0].turn.ui_capabilities is not None and runs[0].turn.ui_capabilities.formats == ["text"]
    bodies = gw.http.bodies()
    assert bodies[0] == "✓ Checked the weather in Lisbon"
    assert bodies[1].startswith("Lisbon: ") and "°C" in bodies[1]  # the card's text form
    assert bodies[2].startswith("It's ") and len(bodies) == 3


async def test_two_quick_messages_start_their_turns_in_the_order_they_came(aiohttp_client: Any) -> None:
    """The first message's sender takes long to resolve: the second still waits its turn."""
    from twilio.rest import Client

    from channels.web import WebChannel
    from channels.whatsapp import SettingsSenderResolver, WhatsAppChannel, WhatsAppSender
    from gateway import create_app
    from gateway.models import ScriptedModel, ScriptStep

    from .conftest import ACCOUNT_SID, AUTH_TOKEN, FAST, INBOUND_URL, RecordingHttp, channel_options, inbound, settings
    from .conftest import sign as sign_webhook

    second_posted = asyncio.Event()

    class SlowFirst(SettingsSenderResolver):
        calls = 0

        async def resolve(self, sender: WhatsAppSender) -> Actor | None:
            SlowFirst.calls += 1
            if SlowFirst.calls == 1:
                await second_posted.wait()  # a directory lookup still going when the next message comes
            return await super().resolve(sender)

    runtime = Runtime(
        agents=[Agent(name="assistant")],
        model=ScriptedModel(lambda request, n: ScriptStep(text=f"reply {n}")),
        store=MemoryStore(),
    )
    http = RecordingHttp()
    twilio, senders = channel_options()
    channel = WhatsAppChannel(
        twilio,
        senders=senders,
        twilio_client=Client(ACCOUNT_SID, AUTH_TOKEN, http_client=http),
        resolver=SlowFirst(),
        options=FAST,
    )
    client = await aiohttp_client(create_app(settings(), runtime=runtime, channels=[WebChannel(), channel]))
    try:
        for text in ("first", "second"):
            fields = inbound(text)
            answer = await client.post("/channels/whatsapp", data=fields, headers=sign_webhook(INBOUND_URL, fields))
            assert answer.status == 200
        second_posted.set()
        await http.wait_messages(2, timeout=15)
        async with asyncio.timeout(15):
            await channel.delivery.idle()
        history = [m for m in await runtime.store.get_messages(THREAD) if m.role == "user"]
        assert [m.content for m in history] == ["first", "second"]
    finally:
        await runtime.aclose()
