"""The demo tools: one of each kind a gateway governs, over the demo shop's data."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from tools import (
    Confirmation,
    ConfirmTemplate,
    MetricsView,
    PreflightCompleted,
    PreflightDenied,
    PreflightReady,
    ResultField,
    Tool,
    ToolContext,
    ToolDefinition,
    ToolFailed,
    ToolPresentation,
    UiComponent,
    define_confirmed_tool,
    define_tool,
)

from ._data import ORDERS, PERIODS, Order, Period, sales_series, weather_for

__all__ = ["demo_tools", "is_demo_tool"]

_DESCRIPTIONS = {
    "get_weather": "Current weather for a city.",
    "list_orders": "The customer's recent orders with their status and totals.",
    "sales_report": "Revenue by channel for a period, as a chart.",
    "get_invoice": "The invoice of one order, as a document.",
    "refund_order": "Refund one of the customer's delivered orders to their card.",
    "cancel_subscription": (
        "Cancel the customer's Coffee Club subscription. The first call returns a preview and a confirm_token; "
        "call again with the same arguments, confirm=true and the token once the customer agrees."
    ),
}
"""Each demo tool's description, by name."""


def is_demo_tool(tool: ToolDefinition) -> bool:
    """Whether an offered tool is one of the demo's: its name and description both are.

    By name alone an app's own ``get_weather`` would be taken for the demo's, and the demo's
    phrasings and wording would be used for a tool that wants other arguments.
    """
    return _DESCRIPTIONS.get(tool.name) == tool.description


class CityInput(BaseModel):
    """Which city."""

    city: str = Field(min_length=1, max_length=80, description="The city, e.g. Lisbon.")


class OrdersInput(BaseModel):
    """Which orders."""

    status: Literal["all", "open", "delivered"] = Field(default="all", description="Filter by status.")


class SalesInput(BaseModel):
    """Which period."""

    period: Period = Field(
        default="month",
        description="The period to chart, up to now: day (today), week, month, quarter or year.",
    )


class OrderInput(BaseModel):
    """Which order."""

    # Any number, not only ones shaped like the shop's: "order 1" reaches the tool, which says
    # plainly that there is no such order instead of failing validation in the model's words.
    order_id: str = Field(pattern=r"^\d+$", max_length=20, description="The order number, e.g. 1042.")


class RefundInput(OrderInput):
    """Which order, and why."""

    reason: str | None = Field(default=None, max_length=200, description="Why the customer wants a refund.")


class SubscriptionInput(BaseModel):
    """Which subscription (the demo customer has one)."""

    plan: Literal["coffee-club"] = "coffee-club"


def _money(value: float) -> str:
    return f"€{value:,.2f}"


def _order_row(order: Order, refunded: set[str]) -> dict[str, Any]:
    return {
        "id": order.id,
        "date": order.date,
        "item": order.item,
        "total": order.total,
        "status": "refunded" if order.id in refunded else order.status,
    }


class _Shop:
    """What the demo remembers per actor, in this process's memory (it is a demo)."""

    def __init__(self) -> None:
        self.refunded: dict[str, set[str]] = {}
        self.cancelled: set[str] = set()

    def refunds_of(self, ctx: ToolContext) -> set[str]:
        return self.refunded.setdefault(ctx.actor.id, set())


def _weather_card(out: dict[str, Any], ctx: ToolContext) -> UiComponent:
    return UiComponent(
        component="KpiCards",
        props={
            "items": [
                {"label": out["city"], "value": out["temp_c"], "unit": "°C"},
                {"label": "Conditions", "value": out["condition"]},
                {"label": "Wind", "value": out["wind_kmh"], "unit": "km/h"},
                {"label": "Humidity", "value": out["humidity"], "unit": "%"},
            ]
        },
        fallback_text=f"{out['city']}: {out['temp_c']}°C, {str(out['condition']).lower()}, wind {out['wind_kmh']} km/h",
    )


def _weather_tool() -> Tool:
    @define_tool(
        name="get_weather",
        description=_DESCRIPTIONS["get_weather"],
        input=CityInput,
        presentation=ToolPresentation(
            label="Weather",
            running="Checking the weather in {city}",
            done="Checked the weather in {city}",
            icon="weather",
        ),
        present=_weather_card,
    )
    async def get_weather(input: CityInput, ctx: ToolContext) -> dict[str, object]:
        return weather_for(input.city)

    return get_weather


def _orders_table(out: dict[str, Any], ctx: ToolContext) -> UiComponent:
    return UiComponent(
        component="DataTable",
        props={
            "title": "Your orders",
            "columns": [
                {"key": "id", "label": "Order"},
                {"key": "date", "label": "Date", "format": "date"},
                {"key": "item", "label": "Item"},
                {"key": "total", "label": "Total", "align": "right", "format": "currency", "currency": "EUR"},
                {"key": "status", "label": "Status"},
            ],
            "rows": out["orders"],
        },
    )


def _orders_tool(shop: _Shop) -> Tool:
    @define_tool(
        name="list_orders",
        description=_DESCRIPTIONS["list_orders"],
        input=OrdersInput,
        presentation=ToolPresentation(
            label="Orders", running="Looking up your orders", done="Found your orders", icon="orders"
        ),
        present=_orders_table,
    )
    async def list_orders(input: OrdersInput, ctx: ToolContext) -> dict[str, object]:
        done = shop.refunds_of(ctx)
        rows = [_order_row(o, done) for o in ORDERS.values()]
        if input.status == "open":
            rows = [r for r in rows if r["status"] in ("processing", "shipped")]
        elif input.status == "delivered":
            rows = [r for r in rows if r["status"] == "delivered"]
        return {"orders": rows, "count": len(rows)}

    return list_orders


def _sales_tool() -> Tool:
    @define_tool(
        name="sales_report",
        description=_DESCRIPTIONS["sales_report"],
        input=SalesInput,
        presentation=ToolPresentation(
            label="Sales report",
            running="Charting sales for the {period}",
            done="Charted sales for the {period}",
            icon="chart",
            result=MetricsView(fields=[ResultField(path="total", label="Revenue", unit="EUR")]),
        ),
    )
    async def sales_report(input: SalesInput, ctx: ToolContext) -> dict[str, object]:
        rows = sales_series(input.period)
        total = round(sum(r["online"] + r["stores"] for r in rows), 2)
        when = PERIODS[input.period]
        ctx.emit_ui(
            "Chart",
            {
                "type": "line" if input.period in ("day", "week") else "bar",
                "title": f"Revenue {when}",
                "x_key": "period",
                "series": [{"key": "online", "label": "Online"}, {"key": "stores", "label": "Stores"}],
                "data": rows,
                "unit": "€",
            },
            fallback_text=f"Revenue {when}: {_money(total)}",
        )
        return {"period": input.period, "total": total, "buckets": len(rows)}

    return sales_report


def _invoice_props(order: Order, billed_to: str) -> dict[str, Any]:
    net = round(order.total / 1.23, 2)
    return {
        "title": f"Invoice INV-{order.id}",
        "subtitle": f"Order {order.id} · {order.date}",
        "sections": [
            {"heading": "Billed to", "text": f"{billed_to}\nCard ending {order.card}"},
            {
                "heading": "Items",
                "table": {
                    "columns": [
                        {"key": "item", "label": "Item"},
                        {"key": "qty", "label": "Qty", "align": "right", "format": "number"},
                        {
                            "key": "price",
                            "label": "Unit price",
                            "align": "right",
                            "format": "currency",
                            "currency": "EUR",
                        },
                        {"key": "total", "label": "Total", "align": "right", "format": "currency", "currency": "EUR"},
                    ],
                    "rows": [
                        {"item": order.item, "qty": order.quantity, "price": order.unit_price, "total": order.total}
                    ],
                },
            },
            {"heading": "Notes", "text": "Thank you for shopping with the Agora demo shop."},
        ],
        "totals": [
            {"label": "Net", "value": _money(net)},
            {"label": "VAT 23%", "value": _money(order.total - net)},
            {"label": "Total", "value": _money(order.total)},
        ],
    }


def _invoice_tool() -> Tool:
    @define_tool(
        name="get_invoice",
        description=_DESCRIPTIONS["get_invoice"],
        input=OrderInput,
        presentation=ToolPresentation(
            label="Invoice",
            running="Fetching the invoice of order {order_id}",
            done="Invoice of order {order_id}",
            icon="document",
        ),
    )
    async def get_invoice(input: OrderInput, ctx: ToolContext) -> dict[str, object]:
        order = ORDERS.get(input.order_id)
        if order is None:
            raise ToolFailed(_unknown_order(input.order_id), code="not_found")
        ctx.emit_ui(
            "Document",
            _invoice_props(order, "Demo customer" if ctx.actor.id.startswith("anon:") else ctx.actor.id),
            fallback_text=f"Invoice INV-{order.id}: {order.item} x{order.quantity}, total {_money(order.total)}",
        )
        return {"invoice": f"INV-{order.id}", "order_id": order.id, "total": order.total}

    return get_invoice


def _receipt(out: dict[str, Any], ctx: ToolContext) -> UiComponent | None:
    if out.get("already_refunded"):
        return None  # the first refund's receipt stands as it was
    return UiComponent(
        component="KpiCards",
        props={
            "items": [
                {"label": "Refunded", "value": _money(float(out["amount"]))},
                {"label": "Order", "value": out["order_id"]},
                {"label": "Reference", "value": out.get("reference", "-")},
            ]
        },
        fallback_text=f"Refund receipt: {_money(float(out['amount']))} for order {out['order_id']}",
    )


def _unknown_order(order_id: str) -> str:
    return f"There is no order {order_id}; your orders are {min(ORDERS)} to {max(ORDERS)}."


def _not_refundable(order: Order) -> str:
    # Delivered only, as the description says. A refund pays back goods the customer has: while
    # the parcel is still out it may yet arrive, and would then be paid back and kept.
    if order.status == "shipped":
        return f"Order {order.id} is still on its way; it can be refunded once it is delivered."
    return f"Order {order.id} has not shipped yet, so there is nothing to refund; only delivered orders are refunded."


def _refund_tool(shop: _Shop) -> Tool:
    def preflight(input: RefundInput, ctx: ToolContext, phase: str) -> Any:
        order = ORDERS.get(input.order_id)
        if order is None:
            return PreflightDenied(reason=_unknown_order(input.order_id))
        if order.id in shop.refunds_of(ctx):
            return PreflightCompleted(
                output={"order_id": order.id, "amount": order.total, "already_refunded": True},
                done=f"Order {order.id} was already refunded",
            )
        if order.status != "delivered":
            return PreflightDenied(reason=_not_refundable(order))
        if phase == "prepare":
            return PreflightReady(
                confirmation=Confirmation(
                    title=f"Refund {_money(order.total)} for order {order.id}?",
                    verb="Refund",
                    detail=f"{order.item} · back to the card ending {order.card}",
                )
            )
        return PreflightReady()

    @define_tool(
        name="refund_order",
        description=_DESCRIPTIONS["refund_order"],
        input=RefundInput,
        kind="action",
        preflight=preflight,
        present=_receipt,
        presentation=ToolPresentation(
            label="Refund",
            running="Refunding order {order_id}",
            done="Refunded order {order_id}",
            icon="refund",
            tone="destructive",
            confirm=ConfirmTemplate(title="Refund order {order_id}?", verb="Refund"),
        ),
    )
    async def refund_order(input: RefundInput, ctx: ToolContext) -> dict[str, object]:
        order = ORDERS[input.order_id]
        shop.refunds_of(ctx).add(order.id)
        return {"order_id": order.id, "amount": order.total, "reference": f"RF-{ctx.idempotency_key[-6:].upper()}"}

    return refund_order


_RENEWAL_DAYS = 30
"""The demo subscription always renews this many days from today."""


def _subscription_tool(shop: _Shop, secret: bytes) -> Tool:
    def prepare(input: SubscriptionInput, ctx: ToolContext) -> dict[str, Any]:
        if ctx.actor.id in shop.cancelled:
            raise ToolFailed("The subscription is already cancelled.", code="already_cancelled")
        renews = date.today() + timedelta(days=_RENEWAL_DAYS)
        return {"plan": input.plan, "actor": ctx.actor.id, "renews": renews.isoformat(), "price": 19.0}

    def preview(prepared: dict[str, Any]) -> dict[str, Any]:
        price, renews = _money(prepared["price"]), prepared["renews"]
        return {
            "summary": f"Cancel the Coffee Club subscription ({price}/month, renews {renews})?",
            "data": {"plan": prepared["plan"], "renews": prepared["renews"]},
        }

    def commit(prepared: dict[str, Any]) -> dict[str, Any]:
        shop.cancelled.add(prepared["actor"])
        return {
            "summary": "The Coffee Club subscription is cancelled; no more renewals.",
            "data": {"plan": prepared["plan"]},
        }

    return define_confirmed_tool(
        name="cancel_subscription",
        description=_DESCRIPTIONS["cancel_subscription"],
        input=SubscriptionInput,
        secret=secret,
        prepare=prepare,
        preview=preview,
        commit=commit,
        presentation=ToolPresentation(
            label="Subscription",
            running="Looking at your subscription",
            done="Subscription checked",
            icon="subscription",
        ),
        commit_presentation=ToolPresentation(
            label="Subscription",
            running="Cancelling your subscription",
            done="Subscription cancelled",
            icon="subscription",
        ),
    )


def demo_tools(secret: bytes) -> list[Tool]:
    """The demo's tools, one of each kind a gateway governs. ``secret`` signs confirm tokens.

    State (refunds, cancellations) lives in this process's memory: it is a demo.
    """
    shop = _Shop()
    return [
        _weather_tool(),
        _orders_tool(shop),
        _sales_tool(),
        _invoice_tool(),
        _refund_tool(shop),
        _subscription_tool(shop, secret),
    ]
