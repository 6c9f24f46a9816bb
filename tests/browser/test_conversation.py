"""The demo conversation in Chromium: streaming text, tool lines, components, approvals, Stop."""

from __future__ import annotations

import asyncio
import re

from playwright.async_api import expect
from pydantic import BaseModel

from gateway import Agent, Runtime
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest, UserMessage
from gateway.stores import MemoryStore
from tools import ToolContext, ToolFailed, ToolPresentation, define_tool

from .conftest import BROWSER_TESTS, Chat, MakeGateway, OpenPage, record_sent

pytestmark = BROWSER_TESTS

# Records, from inside the page, what each tool line showed the moment its tool started: the
# demo's tools finish within milliseconds, so the "running" state is gone before any poll.
RECORD_RUNNING = """el => {
    window.__running = [];
    el.addEventListener('agora-event', (event) => {
        if (event.detail.type !== 'tool-started') return;
        const line = el.shadowRoot.querySelector(`.ac-tool[data-state="running"]`);
        window.__running.push(line && line.textContent.trim());
    });
}"""


async def test_weather_shows_the_tool_line_the_card_and_the_reply(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway)
    chat = Chat(page)
    await chat.ready()
    await expect(chat.root.locator(".ac-badge")).to_have_text("Demo model — rule-based, offline")
    await chat.root.evaluate(RECORD_RUNNING)

    await chat.say("weather in Lisbon")

    turn = await chat.turn_ends(0)
    assert await page.evaluate("window.__running") == ["Checking the weather in Lisbon, running"]
    line = turn.locator(".ac-tool")
    await expect(line).to_have_attribute("data-state", "done")
    await expect(line).to_have_text("Checked the weather in Lisbon, done")
    await expect(line.locator(".ac-tool__icon svg")).to_be_visible()
    # The server-rendered card, styled by /static/components.css inside the shadow root.
    card = turn.locator(".ac-ui[data-component=KpiCards]")
    await expect(card.locator(".ag-kpi").first).to_contain_text("Lisbon")
    assert await card.locator(".ag-kpis__grid").evaluate("el => getComputedStyle(el).display") == "grid"
    reply = turn.locator(".ac-msg--assistant")
    await expect(reply).to_contain_text("in Lisbon, with wind at")
    await expect(reply).not_to_have_attribute("aria-busy", "true")
    await expect(chat.user_texts).to_have_text(["weather in Lisbon"])
    # Each message says who said it (to screen readers) and when.
    await expect(chat.user_messages).to_have_text([re.compile(r"^You: weather in Lisbon\s*\d{1,2}:\d{2}")])
    await expect(reply).to_have_text(re.compile(r"^Assistant: .*in Lisbon.*\d{1,2}:\d{2}"))
    await expect(chat.stop_button).to_be_hidden()


async def test_markdown_subset_is_rendered_and_model_text_is_never_html(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway)
    chat = Chat(page)
    await chat.ready()

    await chat.say("hello <img src=x onerror=alert(1)>")

    turn = await chat.turn_ends(0)
    reply = turn.locator(".ac-msg--assistant")
    # The demo's help text: a "- " list whose items are *bold*.
    await expect(reply.locator("li")).to_have_count(6)
    await expect(reply.locator("li strong").first).to_have_text("weather in Lisbon")
    # What the person typed is shown as text, not parsed.
    await expect(chat.user_texts.first).to_have_text("hello <img src=x onerror=alert(1)>")
    assert await chat.root.locator("img").count() == 0


async def test_refund_approved_shows_the_warning_card_then_the_receipt(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway)
    chat = Chat(page)
    await chat.ready()

    await chat.say("refund order 1042")

    await chat.turn_ends(0, "awaiting-approval")
    card = chat.approvals.first
    await expect(card.locator(".ac-approval__title")).to_have_text("Refund €129.00 for order 1042?")
    await expect(card.locator(".ac-approval__detail")).to_contain_text("Burr grinder · back to the card ending 4242")
    await expect(card).to_have_attribute("data-tone", "destructive")
    approve = card.get_by_role("button", name="Refund", exact=True)
    await expect(approve).to_have_class("ac-btn ac-btn--danger")
    red, green, blue = await approve.evaluate(
        "el => getComputedStyle(el).backgroundColor.match(/\\d+/g).slice(0, 3).map(Number)"
    )
    assert red > 150 and green < 90 and blue < 90, "the destructive verb is styled as a warning"
    await expect(chat.input).to_be_enabled()

    await approve.click()

    await expect(card).to_have_attribute("data-status", "approved")
    await expect(card.locator(".ac-approval__outcome")).to_have_text("Approved by you.")
    await expect(card.get_by_role("button")).to_have_count(0)
    turn = await chat.turn_ends(0)
    await expect(turn.locator(".ac-tool")).to_have_text("Refunded order 1042, done")
    receipt = turn.locator(".ac-ui[data-component=KpiCards]")
    await expect(receipt).to_contain_text("Refunded")
    await expect(receipt).to_contain_text("€129.00")
    await expect(turn.locator(".ac-msg--assistant .ac-msg__body")).to_have_text(
        "Done: €129.00 for order 1042 is on its way back to your card."
    )


async def test_refund_rejected_disables_the_buttons_then_shows_the_outcome(gateway: str, open_page: OpenPage) -> None:
    page = await open_page()
    sent = record_sent(page)
    await page.goto(gateway)
    chat = Chat(page)
    await chat.ready()

    await chat.say("refund order 1041")

    await chat.turn_ends(0, "awaiting-approval")
    card = chat.approvals.first
    await expect(card.locator(".ac-approval__title")).to_have_text("Refund €55.50 for order 1041?")
    # Read the buttons in the same task as the clicks: no answer can have arrived in between. A
    # second click while pending sends nothing more.
    states = await card.evaluate(
        """card => { card.querySelector('[data-action=reject]').click();
            card.querySelector('[data-action=approve]').click();
            return [...card.querySelectorAll('button')].map(b => [b.textContent, b.getAttribute('aria-disabled')]); }"""
    )
    assert states == [["Reject", "true"], ["Refund", "true"]]

    await expect(card).to_have_attribute("data-status", "rejected")
    await expect(card.locator(".ac-approval__outcome")).to_have_text("Rejected by you.")
    turn = await chat.turn_ends(0)
    await expect(turn.locator(".ac-msg--assistant")).to_contain_text("I did not go ahead.")
    await expect(turn.locator(".ac-ui")).to_have_count(0)
    await expect(turn.locator(".ac-tool")).to_have_count(0)
    assert [f["type"] for f in sent] == ["hello", "send", "reject"]


class _NoInput(BaseModel):
    """Nothing."""


def _scripted_runtime() -> Runtime:
    """A scripted model and two tools: one never finishes on its own (only Stop ends its run), one
    always fails. "break" makes the model itself fail."""

    @define_tool(
        name="crunch_numbers",
        description="A long computation.",
        input=_NoInput,
        presentation=ToolPresentation(running="Crunching the numbers", done="Crunched the numbers", icon="chart"),
    )
    async def crunch_numbers(input: _NoInput, ctx: ToolContext) -> dict[str, object]:
        await asyncio.Event().wait()
        return {}

    @define_tool(
        name="find_parcel",
        description="Where a parcel is.",
        input=_NoInput,
        presentation=ToolPresentation(running="Finding your parcel", done="Found your parcel", icon="orders"),
    )
    async def find_parcel(input: _NoInput, ctx: ToolContext) -> dict[str, object]:
        raise ToolFailed("The carrier did not answer.", code="carrier_down")

    def script(request: ModelRequest, index: int) -> ScriptStep:
        last = request.messages[-1]
        if isinstance(last, UserMessage):
            if last.content == "break":
                return ScriptStep(error="The model is unreachable.")
            tool = "find_parcel" if "parcel" in last.content else "crunch_numbers"
            return ScriptStep(tool_calls=[ToolCallRequest(name=tool, args={})])
        return ScriptStep(text="Sorry, I could not find it.")

    return Runtime(
        tools=[crunch_numbers, find_parcel],
        agents=[Agent(name="assistant")],
        model=ScriptedModel(script),
        store=MemoryStore(),
    )


async def test_stop_cancels_the_running_run(make_gateway: MakeGateway, open_page: OpenPage) -> None:
    page = await open_page(await make_gateway(_scripted_runtime()))
    chat = Chat(page)
    await chat.ready()
    await expect(chat.root.locator(".ac-badge")).to_be_hidden()

    await chat.say("crunch the numbers")

    line = chat.turn(0).locator(".ac-tool")
    await expect(line).to_have_attribute("data-state", "running")
    await expect(line.locator(".ac-spinner")).to_be_visible()
    await expect(chat.stop_button).to_be_visible()
    await expect(chat.stop_button).to_have_accessible_name("Stop")
    await expect(chat.send_button).to_be_disabled()

    await chat.stop_button.click()

    turn = await chat.turn_ends(0, "cancelled")
    await expect(line).to_have_attribute("data-state", "stopped")
    await expect(line).to_have_text("Crunching the numbers, Stopped")
    await expect(turn.locator(".ac-notice")).to_have_text("Stopped.")
    await expect(chat.stop_button).to_be_hidden()
    assert (await chat.active_element()).startswith("textarea")
    await chat.input.fill("again")
    await expect(chat.send_button).to_be_enabled()


async def test_failed_tools_and_failed_runs_are_shown(make_gateway: MakeGateway, open_page: OpenPage) -> None:
    page = await open_page(await make_gateway(_scripted_runtime()))
    chat = Chat(page)
    await chat.ready()

    await chat.say("where is my parcel?")

    turn = await chat.turn_ends(0)
    line = turn.locator(".ac-tool")
    await expect(line).to_have_attribute("data-state", "failed")
    await expect(line).to_have_text("Finding your parcel, failed: The carrier did not answer.")
    await expect(turn.locator(".ac-msg--assistant .ac-msg__body")).to_have_text("Sorry, I could not find it.")

    await chat.say("break")

    turn = await chat.turn_ends(1, "failed")
    notice = turn.locator(".ac-notice--error")
    await expect(notice.locator("span")).to_have_text("The model is unreachable.")
    await expect(notice.get_by_role("button", name="Retry")).to_be_visible()
    await expect(notice).to_have_attribute("role", "alert")
    await expect(chat.input).to_be_editable()
