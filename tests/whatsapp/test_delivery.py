"""Delivery under faults (429, 500, 400, Twilio unreachable), narration, the 24 h window, odd input."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import aiohttp
import pytest
from pydantic import BaseModel

from channels.whatsapp import MAX_BODY, to_whatsapp
from gateway import Agent, Runtime
from gateway.events import Turn
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from tools import Actor, ToolContext, ToolPresentation, define_tool

from .conftest import ALICE, BRUNA, MESSAGES_URL, Gateway, MakeGateway, RecordingHttp, inbound, thread_of

THREAD = thread_of(ALICE)
TEMPLATE = "HX" + "e" * 32
ALICE_ACTOR = Actor(id=f"whatsapp:{ALICE}", roles=["member"])


def unreachable() -> Exception:
    return aiohttp.ClientConnectionError("Cannot connect to host api.twilio.com:443")


async def weather(gw: Gateway) -> list[str]:
    await gw.say("weather in Lisbon")
    await gw.http.wait_for(lambda h: any(b.startswith("It's") for b in h.bodies()))
    await gw.settle()
    return gw.http.bodies()


async def test_429_and_500_are_retried_with_the_same_form_fields(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(http=RecordingHttp(script=[429, 500]))
    bodies = await weather(gw)
    assert len(bodies) == 3 and bodies[0] == "✓ Checked the weather in Lisbon"
    tries = [r for r in gw.http.requests if r.url == MESSAGES_URL][:3]
    assert [r.status for r in tries] == [429, 500, 201]
    assert tries[0].data == tries[1].data == tries[2].data
    assert await gw.channel.state.failures(THREAD) == []


async def test_an_unreachable_twilio_is_tried_again_later_and_nothing_is_lost(make_gateway: MakeGateway) -> None:
    # One round (3 attempts) fails: the message waits for the next round; nothing is skipped.
    gw = await make_gateway(http=RecordingHttp(script=[unreachable()] * 3))
    bodies = await weather(gw)
    assert len(bodies) == 3 and bodies[0] == "✓ Checked the weather in Lisbon"
    assert len([b for b in bodies if b == bodies[0]]) == 1
    assert len(gw.http.requests) == 6
    assert await gw.channel.state.failures(THREAD) == []
    cursor = await gw.channel.state.cursor(THREAD)
    assert cursor is not None and cursor.seq == await gw.channel.services.runtime.store.last_seq(THREAD)


async def test_a_message_given_up_on_is_recorded_and_the_next_ones_still_go(
    make_gateway: MakeGateway, caplog: pytest.LogCaptureFixture
) -> None:
    gw = await make_gateway(http=RecordingHttp(script=[unreachable()] * 9))  # 3 rounds of 3
    with caplog.at_level(logging.ERROR, "channels.whatsapp.delivery"):
        bodies = await weather(gw)
    assert len(bodies) == 2 and bodies[0].startswith("Lisbon: ")
    (failure,) = await gw.channel.state.failures(THREAD)
    assert failure["reason"] == "gave_up" and failure["event"] == "tool-completed"
    assert failure["message"]["body"] == "✓ Checked the weather in Lisbon"
    assert any("gave_up" in r.message for r in caplog.records)


async def test_a_refused_message_is_not_retried_but_recorded(make_gateway: MakeGateway) -> None:
    refusal = (400, {"code": 21211, "message": "The 'To' number is not a valid phone number.", "status": 400})
    gw = await make_gateway(http=RecordingHttp(script=[refusal]))
    bodies = await weather(gw)
    assert len(bodies) == 2 and len(gw.http.requests) == 3
    (failure,) = await gw.channel.state.failures(THREAD)
    assert (failure["reason"], failure["twilio_code"]) == ("refused", 21211)


def runtime_with(model: ScriptedModel, *tools: Any) -> Runtime:
    return Runtime(tools=tools, agents=[Agent(name="assistant")], model=model)


@pytest.mark.parametrize("garbled", ["not json", "[" * 100_000 + "]" * 100_000, "[]"], ids=["text", "nested", "array"])
async def test_a_garbled_answer_to_a_sent_message_is_never_sent_twice(
    make_gateway: MakeGateway, caplog: pytest.LogCaptureFixture, garbled: str
) -> None:
    # Twilio created the message (201) but its answer cannot be read: it may have gone, so it is
    # recorded, not sent again (and not a traceback every round).
    caplog.set_level(logging.INFO)
    gw = await make_gateway(http=RecordingHttp(script=[(201, garbled)]))
    bodies = await weather(gw)
    await gw.settle()  # recorded at once as refused below: no later round can send it again
    assert len(gw.http.requests) == len(bodies) and len(set(bodies)) == len(bodies)
    [failure] = await gw.channel.state.failures(THREAD)
    assert failure["reason"] == "refused" and failure["seq"] is not None
    assert not [r.getMessage() for r in caplog.records if r.exc_info]


async def test_long_answers_are_formatted_and_split(make_gateway: MakeGateway) -> None:
    paragraph = "This sentence is about coffee, and it goes on for a while. " * 12
    text = "## Summary\n\n**Three** things: [the menu](https://shop.example/menu)\n\n" + "\n\n".join([paragraph] * 5)
    gw = await make_gateway(runtime_with(ScriptedModel([ScriptStep(text=text)])))
    await gw.say("tell me everything")
    await gw.http.wait_for(lambda h: len(h.bodies()) >= 3)
    await gw.settle()
    bodies = gw.http.bodies()
    assert all(len(b) <= MAX_BODY for b in bodies) and len(bodies) == 3
    assert bodies[0].startswith("*Summary*\n\n*Three* things: the menu (https://shop.example/menu)")
    assert "\n\n".join(bodies) == to_whatsapp(text)


class CrunchInput(BaseModel):
    size: int


async def test_slow_tools_are_narrated_while_running_and_fast_ones_are_not(make_gateway: MakeGateway) -> None:
    release = asyncio.Event()

    @define_tool(
        name="crunch",
        description="Crunch numbers.",
        input=CrunchInput,
        presentation=ToolPresentation(running="Crunching {size} numbers", done="Crunched {size} numbers"),
    )
    async def crunch(input: CrunchInput, ctx: ToolContext) -> dict[str, int]:
        if input.size > 1:
            await release.wait()
        return {"total": input.size}

    model = ScriptedModel(
        [
            ScriptStep(tool_calls=[ToolCallRequest(name="crunch", args={"size": 1000})]),
            ScriptStep(text="Finished."),
            ScriptStep(tool_calls=[ToolCallRequest(name="crunch", args={"size": 1})]),
            ScriptStep(text="Quick."),
        ]
    )
    gw = await make_gateway(runtime_with(model, crunch))
    await gw.say("crunch")
    await gw.http.wait_for(lambda h: "⏳ Crunching 1000 numbers…" in h.bodies())
    release.set()
    await gw.http.wait_for(lambda h: "Finished." in h.bodies())
    await gw.say("crunch one")
    await gw.http.wait_for(lambda h: "Quick." in h.bodies())
    await gw.settle()
    assert gw.http.bodies() == [
        "⏳ Crunching 1000 numbers…",
        "✓ Crunched 1000 numbers",
        "Finished.",
        "✓ Crunched 1 numbers",
        "Quick.",
    ]


async def make_stale(gw: Gateway, number: str = ALICE) -> None:
    """Pretend the sender last wrote 25 hours ago."""
    state = gw.channel.state
    record = await state.sender(number)
    assert record is not None
    await state.store.channel_set(state.key("sender", number), {**record, "last_inbound": time.time() - 25 * 3600})


async def test_outside_the_24h_window_approvals_use_the_template_and_the_rest_is_recorded(
    make_gateway: MakeGateway, caplog: pytest.LogCaptureFixture
) -> None:
    gw = await make_gateway(whatsapp_approval_template_sid=TEMPLATE)
    await gw.say("hello")
    await gw.http.wait_messages(1)
    await gw.settle()
    await make_stale(gw)
    runtime = gw.channel.services.runtime
    sent = len(gw.http.messages())

    # A turn on the thread from elsewhere (the web) asks for an approval a day later.
    with caplog.at_level(logging.WARNING, "channels.whatsapp"):
        run_id = await runtime.start_turn(Turn(thread_id=THREAD, actor=ALICE_ACTOR, text="refund order 1042"))
        assert await runtime.wait(run_id, timeout=10) == "awaiting-approval"
        await gw.http.wait_messages(sent + 1)
        await gw.settle()
    request = gw.http.messages()[-1]
    assert request.data["ContentSid"] == TEMPLATE and request.variables["1"] == "Refund €129.00 for order 1042?"
    assert any("more than 24 h ago" in r.message and TEMPLATE in r.message for r in caplog.records)

    # Free-form messages cannot go: recorded, not sent.
    (pending,) = await runtime.pending_approvals(THREAD)
    await runtime.decide(pending.tool_call_id, ALICE_ACTOR, approve=True, via="web")
    assert await runtime.wait(pending.run_id, timeout=10) == "completed"
    await gw.settle()
    assert len(gw.http.messages()) == sent + 1
    reasons = {(f["event"], f["reason"]) for f in await gw.channel.state.failures(THREAD)}
    assert reasons >= {("approval-settled", "outside_window"), ("text-end", "outside_window")}

    # Without a template the request itself is recorded as not sendable.
    plain = await make_gateway()
    await plain.say("hello")
    await plain.http.wait_messages(1)
    await plain.settle()
    await make_stale(plain)
    rt = plain.channel.services.runtime
    run_id = await rt.start_turn(Turn(thread_id=THREAD, actor=ALICE_ACTOR, text="refund order 1042"))
    await rt.wait(run_id, timeout=10)
    await plain.settle()
    assert len(plain.http.messages()) == 1
    failures = await plain.channel.state.failures(THREAD)
    assert failures[-1]["reason"] == "outside_window_no_template"


async def test_media_we_do_not_read_long_messages_and_unknown_senders(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(whatsapp_allow_unknown=False, whatsapp_roles=f"{ALICE}=member|vip")
    runtime = gw.channel.services.runtime

    picture = {"NumMedia": "1", "MediaUrl0": "https://api.twilio.com/media/ME1", "MediaContentType0": "image/jpeg"}
    await gw.post(inbound("", MessageType="image", **picture))
    await gw.post(inbound("", MessageType="location", Latitude="38.7", Longitude="-9.1"))
    await gw.post(inbound("x" * 10_000))
    await gw.settle()
    assert gw.http.bodies() == [
        # The picture's URL is no host of the test's media source (a loopback server): never fetched.
        "I couldn't download that file: please send it again.",
        "I can only read text messages for now.",
        "That message is too long: please keep it under 4096 characters.",
    ]
    assert await runtime.store.get_thread(THREAD) is None

    # A caption with the picture: the text is answered, the picture is not read.
    await gw.post(inbound("weather in Lisbon", MessageType="image", **picture))
    await gw.http.wait_for(lambda h: any(b.startswith("It's") for b in h.bodies()))
    await gw.settle()
    (run,) = await runtime.store.thread_runs(THREAD)
    assert run.turn.actor.roles == ["member", "vip"] and run.turn.text == "weather in Lisbon"

    # Unknown senders hear a polite refusal once (in their language), and nothing runs.
    count = len(gw.http.messages())
    await gw.post(inbound("olá", number=BRUNA))
    await gw.post(inbound("olá?", number=BRUNA))
    await gw.settle()
    refusals = gw.http.messages()[count:]
    assert [(r.data["To"], r.data["Body"]) for r in refusals] == [
        (f"whatsapp:{BRUNA}", "Desculpe, este número não está habilitado para falar com o assistente.")
    ]
    assert await runtime.store.get_thread(thread_of(BRUNA)) is None


async def test_a_message_while_the_previous_turn_runs_waits_its_turn(make_gateway: MakeGateway) -> None:
    release = asyncio.Event()

    @define_tool(name="wait_a_bit", description="Waits.", input=CrunchInput)
    async def wait_a_bit(input: CrunchInput, ctx: ToolContext) -> dict[str, int]:
        await release.wait()
        return {"size": input.size}

    model = ScriptedModel(
        [
            ScriptStep(tool_calls=[ToolCallRequest(name="wait_a_bit", args={"size": 1})]),
            ScriptStep(text="Waited."),
            ScriptStep(text="And the second one."),
        ]
    )
    gw = await make_gateway(runtime_with(model, wait_a_bit))
    await gw.say("first")
    await gw.http.wait_for(lambda h: "⏳ Working…" in h.bodies())
    await gw.say("second")  # queued behind the working run: no "still working", nothing dropped
    release.set()
    await gw.http.wait_for(lambda h: "And the second one." in h.bodies())
    await gw.settle()
    assert gw.http.bodies()[-2:] == ["Waited.", "And the second one."], gw.http.bodies()
    assert gw.http.bodies().index("⏳ Working…") < gw.http.bodies().index("Waited.")
    assert not any(b.startswith("I'm still working") for b in gw.http.bodies())
    runs = await gw.channel.services.runtime.store.thread_runs(THREAD)
    assert [(r.turn.text, r.status) for r in runs] == [("first", "completed"), ("second", "completed")]


async def test_a_thread_another_process_is_delivering_waits_for_its_lease(make_gateway: MakeGateway) -> None:
    gw = await make_gateway()
    await gw.say("hello")
    await gw.http.wait_messages(1)
    await gw.settle()
    state = gw.channel.state
    assert await state.lock(THREAD, "another-process", ttl=60)
    runtime = gw.channel.services.runtime
    run_id = await runtime.start_turn(Turn(thread_id=THREAD, actor=ALICE_ACTOR, text="weather in Lisbon"))
    assert await runtime.wait(run_id, timeout=10) == "completed"
    await gw.settle()
    assert len(gw.http.messages()) == 1  # the lease holder delivers, not us

    await state.unlock(THREAD, "another-process")  # it finished (or died and its lease lapsed)
    await gw.http.wait_for(lambda h: any(b.startswith("It's") for b in h.bodies()))
    await gw.settle()
    assert len(gw.http.messages()) == 4
