"""The widget asks for ``batch`` frames and shows a turn from them as it shows one frame per event."""

from __future__ import annotations

from playwright.async_api import expect

from .conftest import BROWSER_TESTS, Chat, OpenPage, record_received, record_sent, stored

pytestmark = BROWSER_TESTS


async def test_the_widget_asks_for_batch_frames_and_renders_a_turn_from_them(gateway: str, open_page: OpenPage) -> None:
    page = await open_page()
    # Listening before the page navigates: the hello goes out as soon as the socket opens.
    sent = record_sent(page)
    received = record_received(page)
    await page.goto(gateway)
    chat = Chat(page)
    await chat.ready()
    await chat.say("weather in Lisbon")
    await chat.turn_ends(0)
    saved = await stored(page, 1)

    assert [f.get("batch") for f in sent if f["type"] == "hello"] == [True]
    batches = [f for f in received if f["type"] == "batch"]
    assert batches, [f["type"] for f in received]
    events = [e for f in batches for e in f["events"]]
    # Only batch frames carry events; together they hold the whole run, in seq order, each once.
    assert not [f for f in received if "seq" in f]
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs)) and events[-1]["type"] == "run-finished"
    assert len(batches) < len(events)
    # The widget kept (and shows) the events the batches carried: the same as one frame each.
    shown = [(f["seq"], f["type"]) for f in saved["frames"] if "seq" in f]
    assert shown == [(e["seq"], e["type"]) for e in events if e["type"] != "text-delta"]
    answer = next(e["text"] for e in events if e["type"] == "text-end")
    await expect(chat.assistant_texts.last).to_have_text(answer)
    components = [e for e in events if e["type"] == "ui"]
    await expect(chat.components).to_have_count(len(components))
    await expect(chat.tools).to_have_count(len([e for e in events if e["type"] == "tool-started"]))
