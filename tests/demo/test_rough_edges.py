"""The demo model's rough edges (issue 13, item 8), each through a real runtime and the demo tools."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from gateway import Agent
from gateway.events import ApprovalRequestedEvent, ToolCompletedEvent, ToolDeniedEvent, ToolFailedEvent, UiEvent

from .conftest import MakeChat

# -- weather -----------------------------------------------------------------------------------------


async def test_markup_after_weather_is_no_city_and_says_so(make_chat: MakeChat) -> None:
    chat = make_chat()
    for line in ("weather in <img src=x onerror=alert(1)>", "weather in 1042", "weather for <b>Lisbon</b>"):
        said = await chat.say(line)
        assert said.status == "completed" and said.calls == [], line
        assert said.text == "That does not look like a city name. Tell me a city, for example *weather in Lisbon*."


@pytest.mark.parametrize(
    ("line", "city"),
    [
        ("weather in Lisbon", "Lisbon"),
        ("What's the weather like in São Paulo today?", "São Paulo"),
        ("weather for St. Louis", "St. Louis"),
        ("weather Rio de Janeiro", "Rio de Janeiro"),
        ("weather in Lisbon \ufffd", "Lisbon"),  # a character lost on the way ends the city
    ],
)
async def test_the_city_is_the_words_after_weather_and_its_preposition(
    make_chat: MakeChat, line: str, city: str
) -> None:
    chat = make_chat()
    said = await chat.say(line)
    assert said.calls == [("get_weather", {"city": city})]
    (completed,) = said.of(ToolCompletedEvent)
    assert completed.done == f"Checked the weather in {city}"
    assert said.text.startswith("It's ") and f" in {city.title()}, with wind" in said.text


async def test_weather_without_a_city_asks_for_one_and_takes_the_answer(make_chat: MakeChat) -> None:
    chat = make_chat()
    said = await chat.say("what's the weather?")
    assert said.calls == [] and said.text == "Which city? For example *weather in Lisbon*."
    said = await chat.say("Porto")
    assert said.calls == [("get_weather", {"city": "Porto"})]


# -- sales periods -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "period", "when", "buckets"),
    [
        ("sales today", "day", "today", 6),
        ("revenue this week", "week", "this week", 7),
        ("sales this month", "month", "this month", 4),
        ("sales", "month", "this month", 4),
        ("quarterly revenue", "quarter", "this quarter", 3),
        ("sales this year", "year", "this year", 12),
    ],
)
async def test_each_period_people_say_is_charted_and_worded_as_said(
    make_chat: MakeChat, line: str, period: str, when: str, buckets: int
) -> None:
    chat = make_chat()
    said = await chat.say(line)
    assert said.calls == [("sales_report", {"period": period})]
    (chart,) = said.of(UiEvent)
    assert chart.component == "Chart" and chart.props["title"] == f"Revenue {when}"
    assert len(chart.props["data"]) == buckets
    (completed,) = said.of(ToolCompletedEvent)
    assert completed.done == f"Charted sales for the {period}"
    assert said.text.startswith(f"Revenue {when} was €")


async def test_the_sales_tool_offers_every_period(make_chat: MakeChat) -> None:
    chat = make_chat()
    await chat.say("hello")
    period = chat.model.schema_of("sales_report")["properties"]["period"]
    assert period["enum"] == ["day", "week", "month", "quarter", "year"] and period["default"] == "month"
    assert "day (today)" in period["description"]


# -- invoices ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("number", ["1", "99", "123456789"])
async def test_an_invoice_for_any_order_number_goes_to_the_invoice_tool(make_chat: MakeChat, number: str) -> None:
    chat = make_chat()
    said = await chat.say(f"invoice for order {number}")
    assert said.calls == [("get_invoice", {"order_id": number})]
    assert said.components == []  # not the orders table
    unknown = f"There is no order {number}; your orders are 1040 to 1045."
    (failed,) = said.of(ToolFailedEvent)
    assert failed.error == {"code": "not_found", "message": unknown}
    assert said.text == f"That didn't work: {unknown}"


async def test_an_invoice_without_a_number_asks_which_order(make_chat: MakeChat) -> None:
    chat = make_chat()
    said = await chat.say("I need an invoice")
    assert said.calls == [] and said.text == "Which order number? For example *1042*."
    said = await chat.say("1042")
    assert said.calls == [("get_invoice", {"order_id": "1042"})] and said.components == ["Document"]
    assert said.text == "Here is invoice INV-1042 for order 1042."


# -- the subscription's preview ----------------------------------------------------------------------


@pytest.mark.parametrize("refusal", ["no", "No thanks", "keep it", "não", "ok, keep it", "nope, don't"])
async def test_a_refusal_after_the_preview_keeps_the_subscription(make_chat: MakeChat, refusal: str) -> None:
    chat = make_chat()
    said = await chat.say("cancel my subscription")
    assert said.text.endswith("Reply *confirm* to cancel it, or *no* to keep it.")
    said = await chat.say(refusal)
    assert said.calls == [] and said.text == "OK, I kept your Coffee Club subscription: nothing was cancelled."
    # Kept: a "confirm" now confirms nothing, and a new preview finds it still running.
    assert (await chat.say("confirm")).calls == []
    said = await chat.say("cancel my subscription")
    (preview,) = said.of(ToolCompletedEvent)
    assert preview.output["status"] == "preview"


async def test_a_yes_after_the_preview_still_cancels(make_chat: MakeChat) -> None:
    chat = make_chat()
    await chat.say("cancel my subscription")
    said = await chat.say("yes")
    (commit,) = said.of(ToolCompletedEvent)
    assert commit.output["status"] == "done" and commit.done == "Subscription cancelled"
    assert said.text == "The Coffee Club subscription is cancelled; no more renewals."


async def test_the_renewal_is_thirty_days_from_today(make_chat: MakeChat) -> None:
    chat = make_chat()
    before = date.today()
    said = await chat.say("cancel my subscription")
    after = date.today()  # the two differ only when the turn straddles midnight
    (preview,) = said.of(ToolCompletedEvent)
    renews = {(day + timedelta(days=30)).isoformat() for day in (before, after)}
    assert preview.output["data"]["renews"] in renews
    assert any(f"renews {day})?" in preview.output["summary"] for day in renews)


# -- refunds -----------------------------------------------------------------------------------------


async def test_only_delivered_orders_are_refunded_as_the_tool_says(make_chat: MakeChat) -> None:
    chat = make_chat()
    said = await chat.say("refund order 1043")  # shipped, not delivered
    assert said.status == "completed" and said.of(ApprovalRequestedEvent) == []
    (denied,) = said.of(ToolDeniedEvent)
    assert denied.reason == "Order 1043 is still on its way; it can be refunded once it is delivered."
    assert said.text == f"I did not go ahead. {denied.reason}"

    said = await chat.say("refund order 1044")  # processing
    (denied,) = said.of(ToolDeniedEvent)
    assert denied.reason == (
        "Order 1044 has not shipped yet, so there is nothing to refund; only delivered orders are refunded."
    )

    said = await chat.say("refund order 7")
    (denied,) = said.of(ToolDeniedEvent)
    assert denied.reason == "There is no order 7; your orders are 1040 to 1045."

    said = await chat.say("refund order 1042")  # delivered
    assert said.status == "awaiting-approval"
    definition = [t for t in chat.model.requests[-1].tools if t.name == "refund_order"]
    assert definition[0].description == "Refund one of the customer's delivered orders to their card."


# -- tools that are not on offer ---------------------------------------------------------------------


async def test_a_demo_tool_the_agent_does_not_offer_is_named_as_unavailable(make_chat: MakeChat) -> None:
    chat = make_chat(agent=Agent(name="weather", tools=["get_weather", "list_orders"]))
    said = await chat.say("refund order 1042")
    assert said.calls == [] and said.text == "I can't use *refund order* for you here."
    said = await chat.say("hi")
    assert said.text == (
        "Hello! I'm the offline demo model: I follow simple rules, not a real language model. Try:\n"
        "- *weather in Lisbon*\n"
        "- *show my orders*"
    )
