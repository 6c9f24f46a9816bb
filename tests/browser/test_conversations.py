"""The conversations list of the full-page layout: two conversations, switch, rename, delete, reload."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Locator, Page, expect

from .conftest import BROWSER_TESTS, Chat, OpenPage, widget_page

pytestmark = BROWSER_TESTS


class Conversations:
    """The list beside the chat (in the widget's shadow root)."""

    def __init__(self, chat: Chat) -> None:
        self.chat = chat
        self.panel = chat.root.locator(".ac-threads")
        self.rows = chat.root.locator(".ac-thread")
        self.titles = chat.root.locator(".ac-thread__title")
        self.current = chat.root.locator(".ac-thread__open[aria-current=true] .ac-thread__title")
        self.new = self.panel.get_by_role("button", name="New conversation")
        self.toggle = chat.root.locator(".ac-threads-toggle")

    def row(self, title: str) -> Locator:
        return self.rows.filter(has=self.chat.page.locator(".ac-thread__title", has_text=title))


async def on_server(page: Page) -> list[dict[str, Any]]:
    """The person's conversations as the gateway lists them (with the page's own cookie)."""
    body: dict[str, Any] = await page.evaluate("async () => (await fetch('/agent/threads')).json()")
    threads: list[dict[str, Any]] = body["threads"]
    return threads


async def test_two_conversations_switch_rename_delete_and_reload(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway + "/chat")
    chat = Chat(page)
    threads = Conversations(chat)
    await chat.ready()
    await expect(threads.panel).to_be_visible()
    await expect(threads.toggle).to_be_hidden()  # a wide screen shows the list itself
    await expect(chat.root.locator(".ac-threads__empty")).to_be_visible()

    await chat.say("weather in Lisbon")
    await chat.turn_ends(0)
    await expect(threads.titles).to_have_text(["weather in Lisbon"])
    await expect(threads.current).to_have_text("weather in Lisbon")
    await expect(chat.root.locator(".ac-thread__time")).to_have_text(["Just now"])

    await threads.new.click()
    await expect(chat.user_messages).to_have_count(0)
    await expect(threads.current).to_have_count(0)
    await chat.say("show my orders")
    await chat.turn_ends(0)
    await expect(threads.titles).to_have_text(["show my orders", "weather in Lisbon"])
    await expect(threads.current).to_have_text("show my orders")

    # Switch: the other conversation's history comes back from the gateway.
    await threads.row("weather in Lisbon").locator(".ac-thread__open").click()
    await expect(chat.user_texts).to_have_text(["weather in Lisbon"])
    await expect(chat.tools).to_have_count(1)
    await expect(threads.current).to_have_text("weather in Lisbon")
    assert "show my orders" not in await chat.log.inner_text()

    # Rename in place.
    await threads.row("weather in Lisbon").get_by_role("button", name="Rename “weather in Lisbon”").click()
    field = chat.root.get_by_role("textbox", name="Conversation name")
    await expect(field).to_be_focused()
    await field.fill("  Lisbon   trip ")
    await field.press("Enter")
    await expect(threads.titles).to_have_text(["show my orders", "Lisbon trip"])
    assert [t["title"] for t in await on_server(page)] == ["show my orders", "Lisbon trip"]
    # Escape gives up a rename.
    await threads.row("Lisbon trip").get_by_role("button", name="Rename “Lisbon trip”").click()
    await field.fill("never saved")
    await field.press("Escape")
    await expect(threads.titles).to_have_text(["show my orders", "Lisbon trip"])

    # Delete, after a confirm: Cancel keeps it, Delete erases it on the gateway.
    await threads.row("show my orders").get_by_role("button", name="Delete “show my orders”").click()
    confirm = chat.root.get_by_role("group", name="Delete “show my orders”")
    await expect(confirm).to_contain_text("erased for good")
    await expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    await confirm.get_by_role("button", name="Cancel").click()
    await expect(threads.titles).to_have_text(["show my orders", "Lisbon trip"])
    await threads.row("show my orders").get_by_role("button", name="Delete “show my orders”").click()
    await confirm.get_by_role("button", name="Delete").click()
    await expect(threads.titles).to_have_text(["Lisbon trip"])
    assert [t["title"] for t in await on_server(page)] == ["Lisbon trip"]
    await expect(threads.current).to_have_text("Lisbon trip")  # the one on screen stays

    # A reload keeps the list, and the conversation that was open.
    await page.reload()
    await chat.ready()
    await expect(threads.titles).to_have_text(["Lisbon trip"])
    await expect(threads.current).to_have_text("Lisbon trip")
    await expect(chat.user_texts).to_have_text(["weather in Lisbon"])

    # Deleting the conversation on screen starts a new one.
    await threads.row("Lisbon trip").get_by_role("button", name="Delete “Lisbon trip”").click()
    await chat.root.get_by_role("group", name="Delete “Lisbon trip”").get_by_role("button", name="Delete").click()
    await expect(threads.rows).to_have_count(0)
    await expect(chat.user_messages).to_have_count(0)
    await expect(chat.root.locator(".ac-empty")).to_be_visible()
    assert await on_server(page) == []
    await chat.say("hello")
    await chat.turn_ends(0)
    await expect(threads.titles).to_have_text(["hello"])


async def test_on_a_phone_the_list_is_a_drawer_behind_a_button(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway + "/chat", width=360, height=740)
    chat = Chat(page)
    threads = Conversations(chat)
    await chat.ready()
    await chat.say("weather in Lisbon")
    await chat.turn_ends(0)
    await chat.root.locator(".ac-header").get_by_role("button", name="Start a new conversation").click()
    await chat.say("show my orders")
    await chat.turn_ends(0)

    await expect(threads.titles).to_have_text(["show my orders", "weather in Lisbon"])  # listed, not shown
    await expect(threads.panel).to_be_hidden()  # off screen, and out of the tab order
    await expect(threads.toggle).to_be_visible()
    await expect(threads.toggle).to_have_attribute("aria-expanded", "false")
    await expect(chat.input).to_be_in_viewport(ratio=1)

    await threads.toggle.click()
    await expect(threads.panel).to_be_in_viewport()
    await expect(threads.toggle).to_have_attribute("aria-expanded", "true")
    await expect(threads.current.locator("xpath=..")).to_be_focused()
    await page.keyboard.press("Escape")
    await expect(threads.panel).to_be_hidden()
    await expect(threads.toggle).to_be_focused()

    await threads.toggle.click()
    await threads.row("weather in Lisbon").locator(".ac-thread__open").click()
    await expect(threads.panel).to_be_hidden()  # picking one closes the drawer
    await expect(chat.user_texts).to_have_text(["weather in Lisbon"])
    widths = await page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], "nothing sticks out sideways"


async def test_the_list_is_only_in_the_full_page_layout_without_a_fixed_thread(
    gateway: str, open_page: OpenPage, make_gateway: Any
) -> None:
    url = await make_gateway(
        pages={
            "/panel": widget_page(),
            "/fixed": widget_page('<agora-chat layout="page" thread="t-fixed"></agora-chat>'),
        }
    )
    for path in ("/panel", "/fixed"):
        page = await open_page(url + path)
        chat = Chat(page)
        await chat.ready()
        await expect(Conversations(chat).panel).to_be_hidden()
        await expect(Conversations(chat).toggle).to_be_hidden()
