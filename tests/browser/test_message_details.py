"""What a tool line hides until asked (its arguments and result), copying a reply, and when things were said."""

from __future__ import annotations

import re
from datetime import datetime

from playwright.async_api import expect

from .conftest import BROWSER_TESTS, Chat, OpenPage

pytestmark = BROWSER_TESTS


async def test_a_tool_line_expands_to_its_arguments_and_result(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway)
    chat = Chat(page)
    await chat.ready()
    await chat.say("sales this month")
    turn = await chat.turn_ends(0)
    toggle = turn.locator(".ac-tool").get_by_role("button")
    await expect(toggle).to_have_accessible_name("Charted sales for the month, done")
    await expect(toggle).to_have_attribute("aria-expanded", "false")
    details = turn.locator(".ac-tool-details")
    await expect(details).to_be_hidden()

    await toggle.click()

    await expect(toggle).to_have_attribute("aria-expanded", "true")
    await expect(details).to_be_visible()
    # The arguments the model gave, then the narrated result view the tool declares.
    await expect(details.locator(".ac-details__input")).to_have_text("InputPeriodmonth")
    await expect(details.locator(".ac-details__result .ac-result--metrics")).to_contain_text("Revenue")
    controlled = await toggle.get_attribute("aria-controls")
    assert controlled and await details.get_attribute("id") == controlled

    # The keyboard closes it again; a tool without a result view shows its output.
    await toggle.focus()
    await page.keyboard.press("Enter")
    await expect(details).to_be_hidden()
    await chat.say("show my orders")
    turn = await chat.turn_ends(1)
    await turn.locator(".ac-tool").get_by_role("button").click()
    result = turn.locator(".ac-tool-details .ac-details__result")
    await expect(result.locator("dt")).to_have_text(["Orders", "Count"])
    await expect(result.locator("dd")).to_have_text(["6 items", "6"])


async def test_an_assistant_message_can_be_copied(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway)
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    chat = Chat(page)
    await chat.ready()
    await chat.say("weather in Lisbon")
    turn = await chat.turn_ends(0)
    reply = turn.locator(".ac-msg--assistant")
    copy = reply.get_by_role("button", name="Copy message")
    await expect(copy).to_be_visible()
    await expect(chat.user_messages.get_by_role("button")).to_have_count(0)

    await copy.click()

    text = (await reply.locator(".ac-msg__body").text_content() or "").strip()
    assert "Lisbon" in text
    assert await page.evaluate("navigator.clipboard.readText()") == text
    await expect(chat.root.locator("[aria-live=polite]")).to_have_text("Copied")


async def test_message_times_show_on_hover_and_focus_and_are_read(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway)
    chat = Chat(page)
    await chat.ready()
    await chat.say("weather in Lisbon")
    await chat.turn_ends(0)
    user_time = chat.user_messages.first.locator("time")
    reply_time = chat.assistant_messages.first.locator("time")
    for time in (user_time, reply_time):
        stamp = await time.get_attribute("datetime")
        assert stamp and abs((datetime.fromisoformat(stamp) - datetime.now().astimezone()).total_seconds()) < 60
        await expect(time).to_have_text(re.compile(r"\d{1,2}:\d{2}"))
    assert await user_time.evaluate("el => getComputedStyle(el).opacity") == "0"

    await chat.user_messages.first.hover()
    await expect(user_time).to_have_css("opacity", "1")
    await page.mouse.move(1, 1)
    await expect(user_time).to_have_css("opacity", "0")

    # The keyboard: from the conversation, arrows move between messages; the focused one shows its time.
    await chat.log.focus()
    await page.keyboard.press("ArrowUp")
    await expect(chat.assistant_messages.first).to_be_focused()
    await expect(reply_time).to_have_css("opacity", "1")
    await page.keyboard.press("ArrowUp")
    await expect(chat.user_messages.first).to_be_focused()
    await expect(user_time).to_have_css("opacity", "1")
    await page.keyboard.press("ArrowDown")
    await expect(chat.assistant_messages.first).to_be_focused()
    # A screen reader reads the time with the message (hidden only from the eye until then).
    name = await chat.user_messages.first.evaluate("el => el.textContent")
    assert re.search(r"\d{1,2}:\d{2}", name)
    assert await user_time.evaluate("el => el.closest('[aria-hidden=true]') === null")
