"""The agent of a WhatsApp message: by the business number it was sent to (``AGORA_TWILIO_AGENTS``)."""

from __future__ import annotations

from typing import Any

import pytest

from channels.whatsapp import TwilioOptions
from gateway import Agent, Persona, Runtime
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.stores import MemoryStore
from tools import UserError

from .conftest import ALICE, FROM, MakeGateway, inbound, thread_of

BILLING_NUMBER = "whatsapp:+15550000001"
OPS_NUMBER = "whatsapp:+15550000002"


def answer(request: ModelRequest, index: int) -> ScriptStep:
    return ScriptStep(text=f"{request.agent}: {request.instructions}")


def runtime() -> Runtime:
    billing = Agent(
        name="billing",
        instructions="You bill.",
        personas=[Persona(id="formal", label="Formal", instructions="Be formal.")],
        default_persona="formal",
    )
    return Runtime(
        agents=[Agent(name="front", instructions="You greet."), billing, Agent(name="ops", roles=["staff"])],
        model=ScriptedModel(answer),
        store=MemoryStore(),
    )


async def test_the_number_a_message_was_sent_to_chooses_the_agent(make_gateway: MakeGateway) -> None:
    served = runtime()
    gw = await make_gateway(served, twilio_agents=f'{{"{BILLING_NUMBER}": "billing", "{OPS_NUMBER}": "ops"}}')
    response = await gw.post(inbound("invoice please", To=BILLING_NUMBER))
    assert response.status == 200
    await gw.http.wait_messages(1)
    await gw.settle()
    response = await gw.post(inbound("hello", To=FROM))  # a number the map leaves out: the default agent
    assert response.status == 200
    await gw.http.wait_messages(2)
    await gw.settle()
    assert gw.http.bodies() == ["billing: Be formal.", "front: You greet."]
    runs = await served.thread_runs(thread_of(ALICE))
    assert [(r.agent, r.persona) for r in runs] == [("billing", "formal"), ("front", None)]


async def test_an_agent_kept_for_staff_answers_not_set_up_and_runs_nothing(make_gateway: MakeGateway) -> None:
    served = runtime()
    gw = await make_gateway(served, twilio_agents=f"{OPS_NUMBER.removeprefix('whatsapp:')}=ops")
    response = await gw.post(inbound("restart the cluster", To=OPS_NUMBER))
    assert response.status == 200
    await gw.http.wait_messages(1)
    await gw.settle()
    assert gw.http.bodies() == ["Sorry, this number is not set up to talk to the assistant."]
    assert await served.thread_runs(thread_of(ALICE)) == []


async def test_the_default_agent_of_the_channel(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(runtime(), twilio_agent="billing")
    await gw.say("hi")
    await gw.http.wait_messages(1)
    await gw.settle()
    assert gw.http.bodies() == ["billing: Be formal."]


async def test_an_agent_the_gateway_does_not_serve_stops_the_start(make_gateway: MakeGateway) -> None:
    with pytest.raises(UserError, match="AGORA_TWILIO_AGENTS names agent 'nobody'"):
        await make_gateway(runtime(), twilio_agents='{"+15550000009": "nobody"}')


@pytest.mark.parametrize(
    ("raw", "mapped"),
    [
        ('{"whatsapp:+15550000001": "billing"}', {"+15550000001": "billing"}),
        ("+15550000001=billing, whatsapp:+15550000002=ops", {"+15550000001": "billing", "+15550000002": "ops"}),
    ],
)
def test_the_map_reads_json_or_pairs(raw: str, mapped: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGORA_TWILIO_AGENTS", raw)
    options = TwilioOptions(_env_file=None)  # type: ignore[call-arg]
    assert options.agents == mapped
    assert options.agent_for("whatsapp:+15550000001") == "billing"
    assert options.agent_for("whatsapp:+15559999999") is None
