"""The starter app's tools: one that reads (and shows a card), one that acts (after approval)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from tools import (
    ActionTool,
    ConfirmTemplate,
    PreflightDenied,
    ReadTool,
    ToolContext,
    ToolFailed,
    ToolPresentation,
    UiComponent,
)

# Stand-in data: replace with calls to your own systems.
ORDERS: dict[str, dict[str, Any]] = {
    "1001": {"status": "shipped", "items": 2, "total": 38.5, "placed": "2026-11-20", "shipped": "2026-11-22"},
    "1002": {"status": "processing", "items": 1, "total": 12.0, "placed": "2026-11-28", "shipped": None},
}


class OrderInput(BaseModel):
    order_id: str = Field(description="The order number, e.g. 1001.", pattern=r"^[0-9]{1,12}$")


class GetOrder(ReadTool):
    """Reads one order and shows its progress; runs without asking."""

    name = "get_order"
    description = "Look up one order: its status, items, total and dates."
    input = OrderInput
    presentation = ToolPresentation(label="Order", running="Looking up order {order_id}", done="Order {order_id}")

    async def execute(self, input: OrderInput, ctx: ToolContext) -> dict[str, Any]:
        order = ORDERS.get(input.order_id)
        if order is None:
            # A failed call: the model (and the person) read this message.
            raise ToolFailed(f"There is no order {input.order_id}.", code="not_found")
        return {"order_id": input.order_id, **order}

    def present(self, output: dict[str, Any], ctx: ToolContext) -> UiComponent:
        steps = [{"at": output["placed"], "title": "Placed", "text": f"{output['items']} items, {output['total']:.2f}"}]
        if output["shipped"]:
            steps.append({"at": output["shipped"], "title": "Shipped"})
        return UiComponent(
            component="Timeline",
            props={"title": f"Order {output['order_id']}: {output['status']}", "items": steps},
            fallback_text=f"Order {output['order_id']} is {output['status']}.",
        )


class CancelInput(OrderInput):
    reason: str = Field(default="", max_length=200, description="Why the customer cancels (optional).")


class CancelOrder(ActionTool):
    """Cancels an order that has not shipped; a person approves it first."""

    name = "cancel_order"
    description = "Cancel an order that has not shipped yet."
    input = CancelInput
    presentation = ToolPresentation(
        label="Cancel order",
        running="Cancelling order {order_id}",
        done="Cancelled order {order_id}",
        tone="destructive",
        confirm=ConfirmTemplate(
            title="Cancel order {order_id}?", verb="Cancel order", detail="The customer is refunded in full."
        ),
    )

    def preflight(self, input: CancelInput, ctx: ToolContext, phase: str) -> Any:
        order = ORDERS.get(input.order_id)
        if order is None:
            return PreflightDenied(reason=f"There is no order {input.order_id}.")
        if order["status"] != "processing":
            return PreflightDenied(
                reason=f"Order {input.order_id} is {order['status']}: it can no longer be cancelled."
            )
        return None

    async def execute(self, input: CancelInput, ctx: ToolContext) -> dict[str, Any]:
        # ctx.idempotency_key stays the same if this call is retried or resumed: pass it on to
        # your order system so a second attempt does not cancel (or refund) twice.
        ORDERS[input.order_id]["status"] = "cancelled"
        return {"order_id": input.order_id, "status": "cancelled", "reference": ctx.idempotency_key}
