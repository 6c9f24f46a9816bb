"""The bot's agent (``AGORA_TELEGRAM_AGENT``): its chats talk to that agent, in its default persona."""

from __future__ import annotations

import pytest

from gateway import Agent, Persona, Runtime
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.stores import MemoryStore
from tools import UserError

from .conftest import Gateway, MakeGateway, thread_of
from .updates import ALICE_ID, message


def answer(request: ModelRequest, index: int) -> ScriptStep:
    return ScriptStep(text=f"{request.agent} says {request.instructions}")


def runtime() -> Runtime:
    billing = Agent(
        name="billing",
        instructions="You bill.",
        personas=[Persona(id="kind", label="Kind", instructions="Be kind.")],
        default_persona="kind",
    )
    agents = [Agent(name="front", instructions="You greet."), billing, Agent(name="ops", roles=["staff"])]
    return Runtime(agents=agents, model=ScriptedModel(answer), store=MemoryStore())


def sent_texts(gw: Gateway) -> list[str]:
    return [str(call.json["text"]) for call in gw.bot.of("sendMessage")]


async def test_the_bots_agent_answers(make_gateway: MakeGateway) -> None:
    served = runtime()
    gw = await make_gateway(served, options={"agent": "billing"})
    await gw.send(message("hello"))
    await gw.bot.wait_for(lambda b: len(b.of("sendMessage")) >= 1)
    await gw.settle()
    assert sent_texts(gw) == ["billing says Be kind\\."]  # MarkdownV2 escapes the full stop
    [run] = await served.thread_runs(thread_of(ALICE_ID))
    assert (run.agent, run.persona) == ("billing", "kind")


async def test_without_a_setting_the_default_agent_answers(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(runtime())
    await gw.send(message("hello"))
    await gw.bot.wait_for(lambda b: len(b.of("sendMessage")) >= 1)
    await gw.settle()
    assert sent_texts(gw) == ["front says You greet\\."]


async def test_a_bot_for_staff_only_turns_others_away(make_gateway: MakeGateway) -> None:
    served = runtime()
    gw = await make_gateway(served, options={"agent": "ops"})
    await gw.send(message("restart it"))
    await gw.bot.wait_for(lambda b: len(b.of("sendMessage")) >= 1)
    await gw.settle()
    assert len(sent_texts(gw)) == 1 and "not set up" in sent_texts(gw)[0]
    assert await served.thread_runs(thread_of(ALICE_ID)) == []


async def test_an_agent_the_gateway_does_not_serve_stops_the_start(make_gateway: MakeGateway) -> None:
    with pytest.raises(UserError, match="AGORA_TELEGRAM_AGENT names agent 'nobody'"):
        await make_gateway(runtime(), options={"agent": "nobody"})
