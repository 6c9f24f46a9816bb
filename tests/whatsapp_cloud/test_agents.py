"""The agent of the Cloud API's phone number id (``AGORA_WHATSAPP_CLOUD_AGENT``)."""

from __future__ import annotations

import pytest

from gateway import Agent, Persona, Runtime
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.stores import MemoryStore
from tools import UserError

from . import payloads as p
from .conftest import MakeCloud, thread_of


def answer(request: ModelRequest, index: int) -> ScriptStep:
    return ScriptStep(text=f"{request.agent} says {request.instructions}")


def runtime() -> Runtime:
    billing = Agent(
        name="billing",
        instructions="You bill.",
        personas=[Persona(id="kind", label="Kind", instructions="Be kind.")],
        default_persona="kind",
    )
    return Runtime(agents=[Agent(name="front"), billing], model=ScriptedModel(answer), store=MemoryStore())


async def test_the_numbers_agent_answers(make_cloud: MakeCloud) -> None:
    served = runtime()
    cloud = await make_cloud(served, agent="billing")
    await cloud.say("hello")
    await cloud.graph.wait_for(lambda g: len(g.texts()) >= 1)
    await cloud.settle()
    assert cloud.graph.texts() == ["billing says Be kind."]
    [run] = await served.thread_runs(thread_of(p.ALICE))
    assert (run.agent, run.persona) == ("billing", "kind")


async def test_an_agent_the_gateway_does_not_serve_stops_the_start(make_cloud: MakeCloud) -> None:
    with pytest.raises(UserError, match="AGORA_WHATSAPP_CLOUD_AGENT names agent 'nobody'"):
        await make_cloud(runtime(), agent="nobody")
