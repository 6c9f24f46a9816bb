"""A token budget near its end and used up: the widget says so in plain words."""

from __future__ import annotations

from playwright.async_api import expect

from gateway import Agent, Quota, Runtime
from gateway.events import Usage
from gateway.models import ScriptedModel, ScriptStep
from gateway.stores import MemoryStore

from .conftest import BROWSER_TESTS, Chat, MakeGateway, OpenPage, widget_page

pytestmark = BROWSER_TESTS


async def test_the_widget_shows_the_warning_then_the_refusal(make_gateway: MakeGateway, open_page: OpenPage) -> None:
    steps = [ScriptStep(text=f"Answer {n}.", usage=Usage(output_tokens=850, model_calls=1)) for n in range(3)]
    model = ScriptedModel(steps)
    runtime = Runtime(agents=[Agent(name="assistant", quota=Quota(day=1000))], model=model, store=MemoryStore())
    url = await make_gateway(runtime, pages={"/app": widget_page()})
    page = await open_page()
    await page.goto(url + "/app")
    chat = Chat(page)
    await chat.ready()

    await chat.say("hello")
    await chat.turn_ends(0, "completed")
    await chat.say("and now?")  # 850 of 1000 used: the run warns, then answers
    turn = await chat.turn_ends(1, "completed")
    await expect(turn.locator(".ac-notice--quota")).to_have_text("You have used 85% of your daily allowance.")

    await chat.say("one more")  # 1700 used: refused at send, nothing runs
    await expect(
        chat.root.get_by_text("You have used today's allowance of the assistant.", exact=False)
    ).to_be_visible()
    assert model.calls == 2
