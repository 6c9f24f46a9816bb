"""Keyboard, screen readers and small screens."""

from __future__ import annotations

import re

from playwright.async_api import expect

from .conftest import BROWSER_TESTS, Chat, OpenPage

pytestmark = BROWSER_TESTS


async def test_keyboard_only_conversation_with_an_approval(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway)
    chat = Chat(page)
    await chat.ready()

    # The page's first stop is "Skip to the chat", which lands in the message box.
    await page.keyboard.press("Tab")
    await expect(page.locator("a.skip")).to_be_focused()
    await page.keyboard.press("Enter")
    assert (await chat.active_element()).startswith("textarea")
    assert await chat.input.evaluate("el => getComputedStyle(el).outlineStyle") == "solid"

    await page.keyboard.type("show my orders")
    await page.keyboard.press("Shift+Enter")
    await expect(chat.input).to_have_value("show my orders\n")
    await page.keyboard.press("Backspace")
    await page.keyboard.press("Enter")

    await chat.turn_ends(0)
    await expect(chat.input).to_have_value("")
    assert (await chat.active_element()).startswith("textarea")
    await expect(chat.root.locator(".ac-ui[data-component=DataTable] table")).to_be_visible()

    # An approval takes the focus from an empty message box; Tab reaches Reject, then the verb.
    await page.keyboard.type("refund order 1042")
    await page.keyboard.press("Enter")
    await chat.turn_ends(1, "awaiting-approval")
    card = chat.approvals.first
    await expect(card).to_be_focused()
    await expect(card).to_have_accessible_name("Refund €129.00 for order 1042?")
    await page.keyboard.press("Tab")
    assert (await chat.active_element()).endswith("Reject")
    await page.keyboard.press("Tab")
    assert (await chat.active_element()).endswith("Refund")
    verb = card.get_by_role("button", name="Refund")
    assert await verb.evaluate("el => getComputedStyle(el).outlineStyle") == "solid", "a visible focus ring"
    await page.keyboard.press("Enter")

    # The buttons are gone; the card, now telling the outcome, keeps the focus. Tab goes on: to
    # the refund's tool line (it opens on Enter), the reply's copy button, then the message box.
    await expect(card.locator(".ac-approval__outcome")).to_have_text("Approved by you.")
    await expect(card).to_be_focused()
    await chat.turn_ends(1)
    await page.keyboard.press("Tab")
    assert (await chat.active_element()).startswith("button.ac-tool__toggle Refunded order 1042")
    await page.keyboard.press("Enter")
    await expect(chat.turn(1).locator(".ac-tool-details")).to_be_visible()
    await page.keyboard.press("Tab")
    assert (await chat.active_element()).startswith("button.ac-copy")
    await page.keyboard.press("Tab")
    assert (await chat.active_element()).startswith("textarea")


async def test_screen_reader_semantics(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway)
    chat = Chat(page)
    await chat.ready()
    await expect(chat.log).to_have_attribute("role", "log")
    await expect(chat.log).to_have_accessible_name("Conversation")
    await expect(chat.input).to_have_accessible_name("Message")
    await expect(chat.send_button).to_have_accessible_name("Send")
    await expect(chat.root.get_by_role("button", name="Start a new conversation")).to_be_visible()
    announcer = chat.root.locator("[aria-live=polite]")

    await chat.say("weather in Lisbon")

    turn = await chat.turn_ends(0)
    # New messages are read once, whole, from a live region (not word by word as they stream).
    reply = (await turn.locator(".ac-msg--assistant .ac-msg__body").text_content() or "").strip()
    await expect(announcer).to_have_text(reply)
    await expect(turn.locator(".ac-ui")).to_have_attribute("role", "group")
    # A component is a named group: its text form names it.
    await expect(turn.locator(".ac-ui")).to_have_accessible_name(re.compile(r"^Lisbon: \d+°C, [a-z ]+, wind \d+ km/h$"))

    # A new conversation: a new thread, an empty log, the focus in the message box.
    first_thread = await chat.root.evaluate("el => el.threadId")
    await chat.root.get_by_role("button", name="Start a new conversation").click()
    await chat.ready()
    await expect(chat.turns).to_have_count(0)
    await expect(chat.root.locator(".ac-empty")).to_be_visible()
    assert await chat.root.evaluate("el => el.threadId") not in (None, first_thread)
    assert (await chat.active_element()).startswith("textarea")


async def test_dark_mode_and_reduced_motion_follow_the_system(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway, color_scheme="dark")
    await page.emulate_media(reduced_motion="reduce")
    chat = Chat(page)
    await chat.ready()
    panel = chat.root.locator(".ac")
    assert await panel.evaluate("el => getComputedStyle(el).backgroundColor") == "rgb(20, 22, 27)"

    await chat.say("weather in Lisbon")

    turn = await chat.turn_ends(0)
    duration = await turn.locator(".ac-msg--assistant").evaluate("el => getComputedStyle(el).animationDuration")
    assert float(duration.removesuffix("s")) < 0.01
    # Server-rendered cards take the dark palette too.
    card = turn.locator(".ag-c")
    assert await card.evaluate("el => getComputedStyle(el).backgroundColor") == "rgb(20, 22, 27)"

    await chat.root.evaluate("el => el.setAttribute('theme', 'light')")
    assert await panel.evaluate("el => getComputedStyle(el).backgroundColor") == "rgb(255, 255, 255)"


async def test_a_360px_phone_has_no_horizontal_scroll(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway, width=360, height=740)
    chat = Chat(page)
    await chat.ready()

    for index, prompt in enumerate(["show my orders", "sales this month"]):
        await page.get_by_role("button", name=prompt, exact=False).first.click()
        await chat.turn_ends(index)
    await chat.say("refund order 1042")
    await chat.turn_ends(2, "awaiting-approval")

    widths = await page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1] == 360
    log_widths = await chat.log.evaluate("el => [el.scrollWidth, el.clientWidth]")
    assert log_widths[0] <= log_widths[1]
    box = await chat.approvals.get_by_role("button", name="Refund").bounding_box()
    assert box is not None and box["x"] + box["width"] <= 360
    # The wide table scrolls inside its own box instead.
    table = chat.root.locator(".ac-ui[data-component=DataTable]")
    assert await table.evaluate("el => el.getBoundingClientRect().right") <= 360
