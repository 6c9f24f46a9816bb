"""The demo model drives an app's own tools offline: the words of a message pick the tool and its arguments.

The tools are written with the public SDK (``define_tool``, ``ActionTool``, ``@ai_tool``,
``define_confirmed_tool``) and run through a real runtime, approvals included.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

import tools
from gateway.demo import demo_tools
from gateway.events import ApprovalRequestedEvent, ToolCompletedEvent, ToolDeniedEvent, ToolFailedEvent

from .conftest import SECRET, Chat, MakeChat


class OrderRef(BaseModel):
    order_id: str


class CancelInput(BaseModel):
    order_id: str
    reason: str = ""


class SearchInput(BaseModel):
    query: str


class RestockInput(BaseModel):
    shelf_number: str
    boxes: int
    weight_kg: float


class PriorityInput(BaseModel):
    ticket_id: str
    level: Literal["low", "normal", "high"]


class ListInput(BaseModel):
    status: Literal["open", "closed"] | None = None


class AccountInput(BaseModel):
    account_id: str


@tools.define_tool(
    name="get_order",
    description="Look up one order by its id. Returns its status.",
    input=OrderRef,
    presentation=tools.ToolPresentation(label="Order", running="Looking up order {order_id}", done="Order {order_id}"),
)
async def get_order(input: OrderRef, ctx: tools.ToolContext) -> dict[str, str]:
    if input.order_id == "404":
        raise tools.ToolFailed("Order 404 does not exist.", code="not_found")
    return {"order_id": input.order_id, "status": "shipped"}


class CancelOrder(tools.ActionTool):
    name = "cancel_order"
    description = "Cancel an order that has not shipped."
    input = CancelInput
    presentation = tools.ToolPresentation(
        label="Order cancellation", confirm=tools.ConfirmTemplate(title="Cancel order {order_id}?", verb="Cancel")
    )

    def __init__(self) -> None:
        self.cancelled: list[str] = []

    async def execute(self, input: CancelInput, ctx: tools.ToolContext) -> dict[str, str]:
        self.cancelled.append(input.order_id)
        return {"cancelled": input.order_id}


@tools.ai_tool(description="Find products by the words of their name.", input=SearchInput)
class SearchProducts:
    async def execute(self, input: SearchInput, ctx: tools.ToolContext) -> str:
        return f"2 products match {input.query}."


@tools.ai_tool(description="Put boxes back on a shelf.", input=RestockInput, kind="action")
class RestockShelf:
    async def execute(self, input: RestockInput, ctx: tools.ToolContext) -> dict[str, Any]:
        return input.model_dump()


@tools.ai_tool(description="Set how urgent a ticket is.", input=PriorityInput)
class SetPriority:
    async def execute(self, input: PriorityInput, ctx: tools.ToolContext) -> dict[str, Any]:
        return input.model_dump()


@tools.ai_tool(description="The support tickets.", input=ListInput)
class ListTickets:
    async def execute(self, input: ListInput, ctx: tools.ToolContext) -> dict[str, Any]:
        return {"tickets": [], "status": input.status}


def close_account() -> tools.Tool:
    return tools.define_confirmed_tool(
        name="close_account",
        description="Close a customer account.",
        input=AccountInput,
        secret=SECRET,
        prepare=lambda input, ctx: {"account": input.account_id},
        preview=lambda prepared: f"Close account {prepared['account']}?",
        commit=lambda prepared: f"Account {prepared['account']} is closed.",
    )


@pytest.fixture
def cancel_tool() -> CancelOrder:
    return CancelOrder()


@pytest.fixture
def chat(make_chat: MakeChat, cancel_tool: CancelOrder) -> Chat:
    return make_chat(
        tools=[get_order, cancel_tool, SearchProducts, RestockShelf, SetPriority, ListTickets, close_account()]
    )


# -- choosing the tool and its arguments ---------------------------------------------------------------


async def test_a_read_tool_is_called_with_the_id_from_the_message(chat: Chat) -> None:
    said = await chat.say("show order 42")
    # "order" names both get_order and cancel_order: the read wins the tie.
    assert said.status == "completed" and said.calls == [("get_order", {"order_id": "42"})]
    (completed,) = said.of(ToolCompletedEvent)
    assert completed.done == "Order 42" and completed.output == {"order_id": "42", "status": "shipped"}
    assert said.text == "Here is what *Get order* found."


async def test_an_action_parks_for_approval_then_runs(chat: Chat, cancel_tool: CancelOrder) -> None:
    said = await chat.say("please cancel order #42 because it is late")
    assert said.status == "awaiting-approval"
    (requested,) = said.of(ApprovalRequestedEvent)
    # The optional reason is left out (the tool's default fills it).
    assert requested.tool == "cancel_order" and requested.input == {"order_id": "42", "reason": ""}
    assert cancel_tool.cancelled == []
    said = await chat.decide(said, approve=True)
    assert said.status == "completed" and cancel_tool.cancelled == ["42"]
    assert said.text == "*Cancel order* went through."


async def test_a_rejected_action_is_worded_as_not_done(chat: Chat, cancel_tool: CancelOrder) -> None:
    said = await chat.decide(await chat.say("cancel order 7"), approve=False, reason="wrong order")
    (denied,) = said.of(ToolDeniedEvent)
    assert said.text == f"I did not go ahead. {denied.reason}" and "wrong order" in denied.reason
    assert cancel_tool.cancelled == []


async def test_a_missing_id_is_asked_for_and_the_answer_completes_the_request(chat: Chat) -> None:
    said = await chat.say("cancel order")
    assert said.calls == [] and said.of(ApprovalRequestedEvent) == []
    assert said.text == "Which order id?"
    said = await chat.say("42")
    (requested,) = said.of(ApprovalRequestedEvent)
    assert requested.tool == "cancel_order" and requested.input["order_id"] == "42"


async def test_a_refusal_of_the_question_leaves_it(chat: Chat) -> None:
    assert (await chat.say("cancel order")).text == "Which order id?"
    said = await chat.say("never mind")
    assert said.calls == [] and said.text == "OK, I'll leave it."
    assert (await chat.say("42")).of(ApprovalRequestedEvent) == []  # the question is no longer open


async def test_a_new_request_after_a_question_is_read_on_its_own(chat: Chat) -> None:
    assert (await chat.say("cancel order")).text == "Which order id?"
    said = await chat.say("show order 9")
    assert said.calls == [("get_order", {"order_id": "9"})]


async def test_other_strings_take_the_rest_of_the_text(chat: Chat) -> None:
    said = await chat.say("search products for a burr grinder")
    assert said.calls == [("search_products", {"query": "burr grinder"})]
    assert said.text == "2 products match burr grinder."  # a tool that answers in words is quoted
    assert (await chat.say("search products")).text == "Which query?"


async def test_numbers_fill_numeric_fields_in_order_and_ids_take_a_token_with_a_digit(chat: Chat) -> None:
    said = await chat.say("restock shelf B7 with 12 boxes of 2.5 kg")
    (requested,) = said.of(ApprovalRequestedEvent)
    assert requested.input == {"shelf_number": "B7", "boxes": 12, "weight_kg": 2.5}


async def test_an_enum_takes_a_word_of_the_message_or_is_asked_with_its_values(chat: Chat) -> None:
    said = await chat.say("set priority of ticket 9 to HIGH")
    assert said.calls == [("set_priority", {"ticket_id": "9", "level": "high"})]
    said = await chat.say("set priority of ticket 9")
    assert said.calls == [] and said.text == "Which level: low, normal or high?"
    said = await chat.say("normal")
    assert said.calls == [("set_priority", {"ticket_id": "9", "level": "normal"})]


async def test_an_optional_enum_is_used_when_said_and_left_out_otherwise(chat: Chat) -> None:
    await chat.say("list the open tickets")
    assert chat.model.calls_asked() == [("list_tickets", {"status": "open"})]
    await chat.say("list tickets")
    assert chat.model.calls_asked() == [("list_tickets", {})]


async def test_a_failed_tool_is_worded_with_its_error(chat: Chat) -> None:
    said = await chat.say("get order 404")
    assert said.of(ToolFailedEvent)[0].error["code"] == "not_found"
    assert said.text == "That didn't work: Order 404 does not exist."


async def test_a_confirmed_tool_previews_then_commits_on_yes_or_stays_on_no(chat: Chat) -> None:
    said = await chat.say("close account 77")
    (preview,) = said.of(ToolCompletedEvent)
    assert preview.output["status"] == "preview"
    assert said.text == "Close account 77? Reply *confirm* to go ahead, or *no* to leave it as it is."
    said = await chat.say("no")
    assert said.calls == [] and said.text == "OK, I left it as it is: nothing was changed."

    await chat.say("close account 77")
    said = await chat.say("yes")
    assert said.calls[0][0] == "close_account" and said.calls[0][1]["confirm"] is True
    (commit,) = said.of(ToolCompletedEvent)
    assert commit.output["status"] == "done" and said.text == "Account 77 is closed."


# -- what it says when nothing matches --------------------------------------------------------------


async def test_the_greeting_lists_the_apps_tools_and_never_the_coffee_shop(make_chat: MakeChat) -> None:
    chat = make_chat(tools=[get_order, CancelOrder()])
    said = await chat.say("hello")
    assert said.calls == []
    assert said.text == (
        "Hello! I'm the offline model: I follow simple rules, not a real language model. "
        "I can use these tools; name one in a few words, with what it needs:\n"
        "- *Get order*: Look up one order by its id.\n"
        "- *Cancel order*: Cancel an order that has not shipped."
    )
    # The demo's phrasings are not the app's: no demo tool is named, none is called.
    for line in ("weather in Lisbon", "refund my purchase", "sales this year", "show my invoice"):
        said = await chat.say(line)
        assert said.calls == [] and said.of(ApprovalRequestedEvent) == [], line
        assert said.text.startswith("I didn't catch that. I'm the offline model:"), line
        assert "*Get order*" in said.text and "offline demo" not in said.text and "can't use" not in said.text


async def test_an_apps_tool_named_like_a_demo_tool_is_driven_as_the_apps(make_chat: MakeChat) -> None:
    class Place(BaseModel):
        place: str

    @tools.define_tool(name="get_weather", description="The forecast from our own station.", input=Place)
    async def own_weather(input: Place, ctx: tools.ToolContext) -> dict[str, Any]:
        return {"place": input.place, "sky": "clear"}

    chat = make_chat(tools=[own_weather])
    said = await chat.say("weather in Lisbon")
    assert said.calls == [("get_weather", {"place": "Lisbon"})]
    assert said.text == "Here is what *Get weather* found."
    assert "weather in Lisbon*" not in (await chat.say("hi")).text  # no demo example for it


async def test_an_apps_confirmed_tool_named_like_the_demos_is_refused_in_its_own_words(make_chat: MakeChat) -> None:
    plan = tools.define_confirmed_tool(
        name="cancel_subscription",
        description="Cancel the customer's newsletter subscription.",
        input=AccountInput,
        secret=SECRET,
        prepare=lambda input, ctx: {"account": input.account_id},
        preview=lambda prepared: f"Stop the newsletter of account {prepared['account']}?",
        commit=lambda prepared: "Stopped.",
    )
    chat = make_chat(tools=[plan])
    said = await chat.say("cancel subscription of account 5")
    assert said.calls == [("cancel_subscription", {"account_id": "5", "confirm": False, "confirm_token": None})]
    said = await chat.say("no")
    assert said.text == "OK, I left it as it is: nothing was changed."  # no word of the Coffee Club


async def test_with_no_tools_it_says_so(make_chat: MakeChat) -> None:
    said = await make_chat(tools=[]).say("hello")
    assert said.text == "Hello! I'm the offline model: I follow simple rules, not a real language model. " + (
        "I have no tools to use here."
    )


async def test_the_demo_tools_beside_an_apps_are_both_driven(make_chat: MakeChat) -> None:
    chat = make_chat(tools=[*demo_tools(SECRET), get_order])
    assert (await chat.say("weather in Faro")).calls == [("get_weather", {"city": "Faro"})]
    assert (await chat.say("get order 1042")).calls == [("get_order", {"order_id": "1042"})]
    greeting = (await chat.say("hi")).text
    assert "- *weather in Lisbon*" in greeting and "- *Get order*: Look up one order by its id." in greeting
