"""A model that cannot be reached: the person reads plain words, never its name, and can retry."""

from __future__ import annotations

from aiohttp.test_utils import unused_port
from playwright.async_api import expect

from gateway import Agent, Runtime
from gateway.models import OpenAIModel
from gateway.stores import MemoryStore

from .conftest import BROWSER_TESTS, Chat, MakeGateway, OpenPage, record_sent, widget_page

pytestmark = BROWSER_TESTS


async def test_an_unreachable_model_is_not_named_and_retry_sends_the_message_again(
    make_gateway: MakeGateway, open_page: OpenPage
) -> None:
    model = OpenAIModel(
        "fake", api_key="test-key", base_url=f"http://127.0.0.1:{unused_port()}/v1", max_retries=0, name="openai:fake"
    )
    runtime = Runtime(tools=[], agents=[Agent(name="assistant")], model=model, store=MemoryStore())
    url = await make_gateway(runtime, pages={"/app": widget_page()})
    page = await open_page()
    sent = record_sent(page)
    await page.goto(url + "/app")
    chat = Chat(page)
    await chat.ready()

    await chat.say("what is on my invoice?")

    turn = await chat.turn_ends(0, "failed")
    notice = turn.locator(".ac-notice--error")
    await expect(notice).to_contain_text("The assistant could not be reached.")
    shown = await chat.shown()
    assert "openai" not in shown and "fake" not in shown and "127.0.0.1" not in shown
    retry = notice.get_by_role("button", name="Retry")
    await expect(retry).to_be_visible()

    await retry.click()

    await chat.turn_ends(1, "failed")
    assert [f["text"] for f in sent if f["type"] == "send"] == ["what is on my invoice?"] * 2
    await expect(chat.user_texts).to_have_text(["what is on my invoice?"] * 2)
    # Only the last failure offers to try again.
    await expect(chat.root.get_by_role("button", name="Retry")).to_have_count(1)
    await expect(chat.turn(1).get_by_role("button", name="Retry")).to_be_visible()
