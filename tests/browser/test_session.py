"""Reloads, reconnects and tabs: the conversation is restored exactly once, from where it was."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from playwright.async_api import WebSocketRoute, expect

from .conftest import BROWSER_TESTS, Chat, OpenPage, record_sent, stored

pytestmark = BROWSER_TESTS


async def converse(chat: Chat) -> None:
    """A weather card, then a refund left waiting for approval."""
    await chat.say("weather in Lisbon")
    await chat.turn_ends(0)
    await chat.say("refund order 1042")
    await chat.turn_ends(1, "awaiting-approval")


async def test_a_reload_restores_the_conversation_once_and_resumes_from_the_last_seq(
    gateway: str, open_page: OpenPage
) -> None:
    page = await open_page(gateway)
    sent = record_sent(page)
    chat = Chat(page)
    await chat.ready()
    await converse(chat)
    before = await chat.transcript()
    saved = await stored(page, 2)
    assert saved["seq"] > 0 and saved["users"] and not any(f["type"] == "text-delta" for f in saved["frames"])

    await page.reload()
    await chat.ready()

    hello = [f for f in sent if f["type"] == "hello"][-1]
    assert hello["thread_id"] == saved["thread_id"] and hello["after_seq"] == saved["seq"]
    assert await chat.transcript() == before
    await expect(chat.user_messages).to_have_count(2)
    await expect(chat.components).to_have_count(1)
    # The restored approval still works, and the rest of the run arrives once.
    await chat.approvals.get_by_role("button", name="Refund").click()
    await chat.turn_ends(1)
    await expect(chat.components).to_have_count(2)
    await expect(chat.assistant_messages).to_have_count(2)
    assert len(await chat.transcript()) == len(before) + 3  # tool line, receipt, reply


async def test_without_a_cached_transcript_a_reload_replays_the_thread(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway)
    sent = record_sent(page)
    chat = Chat(page)
    await chat.ready()
    await converse(chat)
    before = await chat.transcript()
    saved = await stored(page, 2)
    # As when the transcript outgrew the storage: only the thread is remembered. (An init script
    # runs before the widget on the next load, after the widget saved on its way out.)
    forget = {"thread_id": saved["thread_id"], "seq": 0, "frames": [], "users": {}}
    await page.add_init_script(
        f"""for (const key of Object.keys(localStorage))
            if (key.startsWith('agora-chat:v1:')) localStorage.setItem(key, {json.dumps(json.dumps(forget))});"""
    )

    await page.reload()
    await chat.ready()

    hello = [f for f in sent if f["type"] == "hello"][-1]
    assert hello["thread_id"] == saved["thread_id"] and hello["after_seq"] == 0
    # What the person typed is not in the event log: it comes from the thread's history.
    await expect(chat.user_texts).to_have_text(["weather in Lisbon", "refund order 1042"])
    assert await chat.transcript() == before


async def test_a_dropped_socket_reconnects_and_replays_what_it_missed(gateway: str, open_page: OpenPage) -> None:
    page = await open_page()
    deaf = asyncio.Event()  # while set, server frames are dropped before they reach the page
    missed_a_whole_run = asyncio.Event()
    hellos: list[dict[str, Any]] = []
    routes: list[tuple[WebSocketRoute, WebSocketRoute]] = []

    def route(ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()
        routes.append((ws, server))

        def to_server(message: str | bytes) -> None:
            frame = json.loads(message)
            if frame["type"] == "hello":
                hellos.append(frame)
            server.send(message)

        def to_page(message: str | bytes) -> None:
            if deaf.is_set():
                # The widget asks for batch frames: the run's end may be one of a frame's events.
                frame = json.loads(message)
                if "run-finished" in [e.get("type") for e in frame.get("events", [frame])]:
                    missed_a_whole_run.set()
            else:
                ws.send(message)

        ws.on_message(to_server)
        server.on_message(to_page)

    await page.route_web_socket("**/agent/ws", route)
    await page.goto(gateway)
    chat = Chat(page)
    await chat.ready()
    await chat.say("weather in Lisbon")
    await chat.turn_ends(0)
    saved = await stored(page, 1)

    deaf.set()
    await chat.say("show my orders")
    async with asyncio.timeout(10):
        await missed_a_whole_run.wait()
    # The ack and the whole run were lost: the message cannot be confirmed yet.
    await expect(chat.user_messages.nth(1)).to_have_attribute("data-state", "sending")
    deaf.clear()
    page_side, server_side = routes[0]
    await server_side.close()
    await page_side.close(code=1001, reason="network change")

    await chat.turn_ends(1)
    assert len(hellos) == 2 and "thread_id" not in hellos[0]
    assert hellos[1]["thread_id"] == saved["thread_id"] and hellos[1]["after_seq"] == saved["seq"]
    await expect(chat.user_texts).to_have_text(["weather in Lisbon", "show my orders"])
    await expect(chat.user_messages.nth(1)).not_to_have_attribute("data-state", "failed")
    await expect(chat.root.locator(".ac-ui[data-component=DataTable]")).to_have_count(1)
    await expect(chat.components).to_have_count(2)
    await expect(chat.assistant_messages).to_have_count(2)


async def test_a_second_tab_shows_the_same_conversation_live(gateway: str, open_page: OpenPage) -> None:
    first = await open_page(gateway)
    one = Chat(first)
    await one.ready()
    await one.say("weather in Lisbon")
    await one.turn_ends(0)
    await stored(first, 1)

    second = await open_page(gateway, context=first.context)
    two = Chat(second)
    await two.ready()
    assert await two.transcript() == await one.transcript()

    await one.say("show my orders")

    await two.turn_ends(1)
    await expect(two.user_texts).to_have_text(["weather in Lisbon", "show my orders"])
    await expect(two.root.locator(".ac-ui[data-component=DataTable]")).to_have_count(1)
    await one.turn_ends(1)
    assert await two.transcript() == await one.transcript()
