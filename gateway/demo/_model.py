"""``DemoModel``: an offline, rule-based stand-in for a language model, for the demo.

It reads the last message and either calls one of the demo tools or words what the tools
answered. It understands a handful of phrasings (see ``HELP``); it is not a language model.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from ..events import Usage
from ..models import AssistantMessage, ModelChunk, ModelRequest, TextChunk, ToolCallRequest, ToolMessage, UserMessage

__all__ = ["HELP", "DemoModel"]

HELP = (
    "I'm the offline demo model: I follow simple rules, not a real language model. Try:\n"
    "- *weather in Lisbon*\n"
    "- *show my orders*\n"
    "- *sales this month*\n"
    "- *invoice for order 1042*\n"
    "- *refund order 1042* (asks for your approval)\n"
    "- *cancel my subscription* (previews, then asks you to confirm)"
)

_WEATHER = re.compile(r"\bweather\b(?:\s+(?:in|for|at))?\s+([A-Za-zÀ-ÿ .'-]{2,60})", re.IGNORECASE)
_REFUND = re.compile(r"\brefund\b\D*(\d{3,8})", re.IGNORECASE)
_INVOICE = re.compile(r"\binvoice\b\D*(\d{3,8})", re.IGNORECASE)
_PERIOD = re.compile(r"\b(week|month|quarter)\b", re.IGNORECASE)
_YES = re.compile(r"^\s*(yes|yep|confirm|confirmed|sure|ok|okay|do it|sim|confirmar)\b", re.IGNORECASE)


def _money(value: float) -> str:
    return f"€{value:,.2f}"


class DemoModel:
    """A rule-based model that drives the demo tools (clearly a demo: see ``HELP``)."""

    name = "demo"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Answer one step: a tool call for a recognised request, else words."""
        available = {tool.name for tool in request.tools}
        last = request.messages[-1] if request.messages else None
        if isinstance(last, ToolMessage):
            text = self._after_tools(request)
        else:
            call = self._plan(request, available)
            if isinstance(call, ToolCallRequest):
                yield call
                yield Usage(model_calls=1)
                return
            text = call
        for piece in re.findall(r"\S+\s*", text) or [text]:
            yield TextChunk(piece)
        yield Usage(model_calls=1, output_tokens=len(text.split()))

    # -- deciding what to call ----------------------------------------------------------------------

    def _plan(self, request: ModelRequest, available: set[str]) -> ToolCallRequest | str:
        text = request.last_user_text.strip()
        wanted = self._intent(text, request)
        if isinstance(wanted, str):
            return wanted
        if wanted.name not in available:
            return f"I can't use *{wanted.name.replace('_', ' ')}* for you here."
        return wanted

    def _intent(self, text: str, request: ModelRequest) -> ToolCallRequest | str:
        lowered = text.lower()
        pending = self._pending_cancel(request)
        if pending is not None and _YES.match(text):
            return ToolCallRequest(name="cancel_subscription", args={**pending, "confirm": True})
        if match := _WEATHER.search(text):
            return ToolCallRequest(name="get_weather", args={"city": match.group(1).strip(" ?.!")})
        if match := _REFUND.search(text):
            return ToolCallRequest(name="refund_order", args={"order_id": match.group(1)})
        if match := _INVOICE.search(text):
            return ToolCallRequest(name="get_invoice", args={"order_id": match.group(1)})
        if "subscription" in lowered and ("cancel" in lowered or "stop" in lowered):
            return ToolCallRequest(name="cancel_subscription", args={})
        if "sales" in lowered or "revenue" in lowered:
            period = _PERIOD.search(text)
            return ToolCallRequest(
                name="sales_report", args={"period": (period.group(1) if period else "month").lower()}
            )
        if "order" in lowered:
            status = "open" if "open" in lowered else "all"
            return ToolCallRequest(name="list_orders", args={"status": status})
        if re.search(r"\b(hi|hello|hey|help|olá|oi)\b", lowered):
            return "Hello! " + HELP
        return "I didn't catch that. " + HELP

    @staticmethod
    def _pending_cancel(request: ModelRequest) -> dict[str, Any] | None:
        """The preview a "yes" would confirm.

        That is the last ``cancel_subscription`` preview, if it is the newest thing said.
        """
        for message in reversed(request.messages[:-1]):
            if isinstance(message, UserMessage):
                return None
            if isinstance(message, ToolMessage) and message.name == "cancel_subscription":
                result = _load(message.content)
                if isinstance(result, dict) and result.get("status") == "preview":
                    return {"confirm_token": result.get("confirm_token")}
                return None
        return None

    # -- wording results ----------------------------------------------------------------------------

    def _after_tools(self, request: ModelRequest) -> str:
        results: list[ToolMessage] = []
        for message in reversed(request.messages):
            if isinstance(message, ToolMessage):
                results.append(message)
            elif isinstance(message, AssistantMessage):
                break
        return " ".join(self._word(m.name, _load(m.content)) for m in reversed(results))

    def _word(self, tool: str, result: Any) -> str:
        if isinstance(result, dict) and "error" in result:
            return f"That didn't work: {result['error'].get('message', 'unknown error')}"
        if isinstance(result, dict) and result.get("denied"):
            return f"I did not go ahead. {result.get('reason', '')}".strip()
        match tool:
            case "get_weather":
                return (
                    f"It's {result['temp_c']}°C and {str(result['condition']).lower()} in {result['city']}, "
                    f"with wind at {result['wind_kmh']} km/h."
                )
            case "list_orders":
                open_count = sum(1 for o in result["orders"] if o["status"] in ("processing", "shipped"))
                return f"You have {result['count']} orders; {open_count} still on their way. The table has the details."
            case "sales_report":
                return f"Revenue this {result['period']} was {_money(result['total'])}. The chart splits it by channel."
            case "get_invoice":
                return f"Here is invoice {result['invoice']} for order {result['order_id']}."
            case "refund_order":
                if result.get("already_refunded"):
                    return f"Order {result['order_id']} was already refunded ({_money(result['amount'])})."
                return (
                    f"Done: {_money(result['amount'])} for order {result['order_id']} is on its way back to your card."
                )
            case "cancel_subscription":
                if result.get("status") == "preview":
                    return f"{result['summary']} Reply *confirm* to cancel it, or anything else to keep it."
                return str(result.get("summary", "Done."))
        return "Done."


def _load(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return content
