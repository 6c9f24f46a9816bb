"""An approval card says what it waits for, then what happened; an error never outlives its cause."""

from __future__ import annotations

import asyncio
import json

from playwright.async_api import WebSocketRoute, expect

from .conftest import BROWSER_TESTS, Chat, OpenPage, record_sent

pytestmark = BROWSER_TESTS


class Link:
    """A page's socket routed to the gateway: it may swallow the first decision sent on it (the
    test then drops the connection), or hold what the page says until ``release()``."""

    def __init__(self, page: WebSocketRoute, server: WebSocketRoute, *, swallow_a_decision: bool, hold: bool) -> None:
        self.page, self.server = page, server
        self.swallowed = asyncio.Event() if swallow_a_decision else None
        self.held: list[str | bytes] | None = [] if hold else None
        page.on_message(self.to_server)
        server.on_message(page.send)

    def to_server(self, message: str | bytes) -> None:
        if self.swallowed is not None and not self.swallowed.is_set() and json.loads(message)["type"] == "approve":
            self.swallowed.set()
        elif self.held is not None:
            self.held.append(message)
        else:
            self.server.send(message)

    async def drop(self) -> None:
        """Lose the connection, as a network change does."""
        await self.server.close()
        await self.page.close(code=1001, reason="network change")

    def release(self) -> None:
        held, self.held = self.held or [], None
        for message in held:
            self.server.send(message)


async def test_a_decided_card_no_longer_asks_for_approval(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway)
    chat = Chat(page)
    await chat.ready()
    await chat.say("refund order 1042")
    await chat.turn_ends(0, "awaiting-approval")
    card = chat.approvals.first
    kicker = card.locator(".ac-approval__kicker")
    await expect(kicker).to_have_text("Needs your approval")

    await card.get_by_role("button", name="Refund").click()

    await expect(card).to_have_attribute("data-status", "approved")
    await expect(kicker).to_have_text("Approved")
    await chat.say("refund order 1041")
    await chat.turn_ends(1, "awaiting-approval")
    second = chat.approvals.nth(1)
    await second.get_by_role("button", name="Reject").click()
    await expect(second.locator(".ac-approval__kicker")).to_have_text("Rejected")
    for text in await chat.approvals.all_text_contents():
        assert "needs your approval" not in text.lower()


async def test_a_decision_lost_with_the_connection_says_so_until_the_connection_is_back(
    gateway: str, open_page: OpenPage
) -> None:
    page = await open_page()
    links: list[Link] = []
    reconnected = asyncio.Event()

    def route(ws: WebSocketRoute) -> None:
        links.append(Link(ws, ws.connect_to_server(), swallow_a_decision=not links, hold=bool(links)))
        if len(links) == 2:
            reconnected.set()

    await page.route_web_socket("**/agent/ws", route)
    await page.goto(gateway)
    chat = Chat(page)
    await chat.ready()
    await chat.say("refund order 1042")
    await chat.turn_ends(0, "awaiting-approval")
    card = chat.approvals.first
    error = card.locator(".ac-approval__error")

    await card.get_by_role("button", name="Refund").click()
    assert links[0].swallowed is not None
    async with asyncio.timeout(10):
        await links[0].swallowed.wait()
    await links[0].drop()

    await expect(error).to_be_visible()
    await expect(error).to_contain_text("connection dropped")
    async with asyncio.timeout(10):
        await reconnected.wait()
    await expect(chat.root.locator(".ac-status")).to_have_attribute("data-state", "reconnecting")
    await expect(error).to_be_visible()
    # The widget reconnected by itself: once the gateway answers, the error is about the past.
    links[1].release()
    await chat.ready()
    await expect(error).to_be_hidden()
    await expect(card).to_have_attribute("data-status", "pending")
    await card.get_by_role("button", name="Refund").click()
    await expect(card).to_have_attribute("data-status", "approved")
    await expect(error).to_be_hidden()
    await chat.turn_ends(0)


async def test_the_always_checkbox_remembers_the_decision(gateway: str, open_page: OpenPage) -> None:
    page = await open_page()
    sent = record_sent(page)
    await page.goto(gateway)
    chat = Chat(page)
    await chat.ready()
    await chat.say("refund order 1042")
    await chat.turn_ends(0, "awaiting-approval")
    card = chat.approvals.first
    always = card.get_by_label("Always allow this in this conversation")
    await expect(always).not_to_be_checked()
    await always.check()  # by its label, as a person would
    await card.get_by_role("button", name="Refund").click()
    await expect(card).to_have_attribute("data-status", "approved")
    await expect(always).to_have_count(0)  # a decided card asks nothing more
    (decision,) = [f for f in sent if f["type"] == "approve"]
    assert decision["remember"] is True
    # The next refund in the conversation runs without asking.
    await chat.say("refund order 1041")
    await chat.turn_ends(1)
    await expect(chat.approvals).to_have_count(1)
