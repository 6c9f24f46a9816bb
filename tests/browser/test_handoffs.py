"""A sub-agent's lines (a handoff) show indented under the line of the call that asked it, with its approval card."""

from __future__ import annotations

from playwright.async_api import expect

from gateway import Agent, Runtime
from gateway.models import ToolCallRequest

from ..handoffs.conftest import asks, purge_tool, replying
from .conftest import BROWSER_TESTS, Chat, MakeGateway, OpenPage

pytestmark = BROWSER_TESTS


async def test_a_sub_agents_lines_and_card_are_nested_under_its_handoff(
    make_gateway: MakeGateway, open_page: OpenPage
) -> None:
    executed: list[str] = []
    purge = ToolCallRequest(name="purge_cache", args={"key": "sessions:42"})
    ops = Agent(name="ops", model=replying(purge, text="Purged it."))
    main = Agent(name="main", handoffs=["ops"], model=asks("ask_ops", "Purge sessions:42", then="All done."))
    gateway = await make_gateway(Runtime(tools=[purge_tool(executed)], agents=[main, ops]))
    page = await open_page(gateway)
    chat = Chat(page)
    await chat.ready()
    await chat.say("purge it")
    await chat.turn_ends(0, "awaiting-approval")
    nested = chat.root.locator(".ac-nested")
    await expect(nested).to_have_count(1)
    await expect(nested).to_have_attribute("aria-label", "Ops at work")
    card = nested.locator(".ac-approval")
    await expect(card).to_have_count(1)
    await card.get_by_role("button", name="Purge").click()
    await chat.turn_ends(0, "completed")
    await expect(nested.locator(".ac-tool")).to_have_count(1)
    await expect(nested.locator(".ac-tool .ac-tool__label")).to_have_text("Purged sessions:42")
    await expect(chat.root.locator(".ac-turn > .ac-tool")).to_have_count(1)  # ask_ops itself, not nested
    await expect(chat.assistant_texts.last).to_have_text("All done.")
    assert len(executed) == 1

    # Replayed on a fresh page, the sub-agent's lines come back nested under their handoff.
    await page.reload()
    chat = Chat(page)
    await chat.ready()
    await expect(chat.root.locator(".ac-nested .ac-tool .ac-tool__label")).to_have_text("Purged sessions:42")
