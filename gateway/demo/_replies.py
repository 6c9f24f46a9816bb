"""What the demo model says: the greeting, and the words for what a tool answered."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from tools import ToolDefinition, humanize_tool_name

from ._data import PERIODS
from ._tools import is_demo_tool

__all__ = ["HELP", "KEPT", "UNCHANGED", "greeting", "word_result"]

_EXAMPLES = {
    "get_weather": "*weather in Lisbon*",
    "list_orders": "*show my orders*",
    "sales_report": "*sales this month* (or today, this week, this quarter, this year)",
    "get_invoice": "*invoice for order 1042*",
    "refund_order": "*refund order 1042* (asks for your approval)",
    "cancel_subscription": "*cancel my subscription* (previews, then asks you to confirm)",
}
_DEMO_INTRO = "I'm the offline demo model: I follow simple rules, not a real language model. Try:"
_APP_INTRO = "I'm the offline model: I follow simple rules, not a real language model."

HELP = "\n".join([_DEMO_INTRO, *(f"- {example}" for example in _EXAMPLES.values())])
"""The greeting's list when every demo tool is on offer."""

KEPT = "OK, I kept your Coffee Club subscription: nothing was cancelled."
"""The answer to "no" after the subscription's preview."""

UNCHANGED = "OK, I left it as it is: nothing was changed."
"""The answer to "no" after any other confirmed tool's preview."""


def _label(name: str) -> str:
    return humanize_tool_name(name)


def _first_sentence(text: str) -> str:
    sentence = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]
    return sentence if len(sentence) <= 120 else sentence[:119].rstrip() + "…"


def greeting(tools: Sequence[ToolDefinition]) -> str:
    """What this model can do with the tools on offer.

    The demo's examples for the demo tools; every other tool by its label and what it does, so an
    app served with this model never hears of the coffee shop.
    """
    lines = [f"- {_EXAMPLES[t.name]}" for t in tools if is_demo_tool(t)]
    others = [t for t in tools if not is_demo_tool(t)]
    if lines and not others:
        return "\n".join([_DEMO_INTRO, *lines])
    for tool in others:
        about = _first_sentence(tool.description)
        lines.append(f"- *{_label(tool.name)}*" + (f": {about}" if about else ""))
    if not lines:
        return f"{_APP_INTRO} I have no tools to use here."
    return "\n".join([f"{_APP_INTRO} I can use these tools; name one in a few words, with what it needs:", *lines])


def _short(text: str) -> str:
    text = text.strip()
    return text if len(text) <= 300 else text[:299].rstrip() + "…"


def _money(value: float) -> str:
    return f"€{value:,.2f}"


def _has(result: Any, *keys: str) -> bool:
    return isinstance(result, Mapping) and all(key in result for key in keys)


def _demo_words(tool: str, result: Any) -> str | None:
    """The demo's words for a demo tool's result; ``None`` for any other shape.

    An app's own tool may share a demo tool's name; its result need not look like the demo's.
    """
    match tool:
        case "get_weather" if _has(result, "temp_c", "condition", "city", "wind_kmh"):
            return (
                f"It's {result['temp_c']}°C and {str(result['condition']).lower()} in {result['city']}, "
                f"with wind at {result['wind_kmh']} km/h."
            )
        case "list_orders" if _has(result, "orders", "count"):
            open_count = sum(1 for o in result["orders"] if o.get("status") in ("processing", "shipped"))
            return f"You have {result['count']} orders; {open_count} still on their way. The table has the details."
        case "sales_report" if _has(result, "period", "total") and result["period"] in PERIODS:
            return f"Revenue {PERIODS[result['period']]} was {_money(result['total'])}. The chart splits it by channel."
        case "get_invoice" if _has(result, "invoice", "order_id"):
            return f"Here is invoice {result['invoice']} for order {result['order_id']}."
        case "refund_order" if _has(result, "order_id", "amount"):
            if result.get("already_refunded"):
                return f"Order {result['order_id']} was already refunded ({_money(result['amount'])})."
            return f"Done: {_money(result['amount'])} for order {result['order_id']} is on its way back to your card."
        case "cancel_subscription" if _has(result, "summary"):
            if result.get("status") == "preview":
                return f"{result['summary']} Reply *confirm* to cancel it, or *no* to keep it."
            return str(result["summary"])
    return None


def word_result(tool: ToolDefinition | None, name: str, result: Any) -> str:
    """A short, true sentence for one tool's result (``tool`` is ``None`` when no longer offered)."""
    if _has(result, "error"):
        error = result["error"]
        message = error.get("message") if isinstance(error, Mapping) else None
        return f"That didn't work: {message or 'the tool reported an error.'}"
    if _has(result, "denied") and result["denied"]:
        reason = str(result.get("reason") or "").strip()
        return f"I did not go ahead. {reason}" if reason else "I did not go ahead."
    # The demo's words for the demo's tools (``None``: no longer offered, so judged by the shape).
    words = _demo_words(name, result) if tool is None or is_demo_tool(tool) else None
    if words is not None:
        return words
    if _has(result, "status", "summary") and result["status"] == "preview":
        # A confirmed tool's preview (``define_confirmed_tool``): nothing happened yet.
        return f"{result['summary']} Reply *confirm* to go ahead, or *no* to leave it as it is."
    if _has(result, "summary") and isinstance(result["summary"], str) and result["summary"].strip():
        return _short(result["summary"])
    if isinstance(result, str) and result.strip():
        # A tool that answers in a sentence has already said it best.
        return _short(result)
    label = _label(name)
    if tool is not None and tool.kind == "action":
        return f"*{label}* went through."
    return f"Here is what *{label}* found."
