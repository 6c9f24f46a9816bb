"""The widget's ``agent`` and ``persona`` attributes reach the socket and choose the run's voice."""

from __future__ import annotations

from playwright.async_api import expect

from gateway import Agent, Persona, Runtime
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.stores import MemoryStore

from .conftest import BROWSER_TESTS, Chat, MakeGateway, OpenPage, record_sent, widget_page

pytestmark = BROWSER_TESTS


def answer(request: ModelRequest, index: int) -> ScriptStep:
    return ScriptStep(text=f"{request.agent} says: {request.instructions}")


async def test_the_agent_and_persona_attributes_choose_who_answers(
    make_gateway: MakeGateway, open_page: OpenPage
) -> None:
    billing = Agent(
        name="billing",
        instructions="You bill.",
        personas=[Persona(id="formal", label="Formal", instructions="Be formal.")],
    )
    runtime = Runtime(agents=[Agent(name="front"), billing], model=ScriptedModel(answer), store=MemoryStore())
    widget = '<agora-chat style="height:560px" agent="billing" persona="formal"></agora-chat>'
    url = await make_gateway(runtime, pages={"/agents-page": widget_page(widget)})
    page = await open_page()
    sent = record_sent(page)
    await page.goto(url + "/agents-page")
    chat = Chat(page)
    await chat.ready()
    await chat.say("hello")
    await expect(chat.assistant_texts.last).to_have_text("billing says: Be formal.")
    hello = next(f for f in sent if f["type"] == "hello")
    send = next(f for f in sent if f["type"] == "send")
    assert hello["agent"] == "billing"
    assert (send["agent"], send["persona"]) == ("billing", "formal")
