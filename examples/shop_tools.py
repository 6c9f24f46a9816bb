"""An example tool module: run it with `agora-gateway serve --tools examples/shop_tools.py`.

Three tools, one of each common shape: a read tool with a component, an action that waits for
approval and checks itself before and after, and a confirmed write that previews first.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, Field

from tools import (
    ActionTool,
    ConfirmTemplate,
    PreflightDenied,
    ReadTool,
    ToolContext,
    ToolPresentation,
    UiComponent,
    define_confirmed_tool,
)

STOCK = {"espresso-beans": 42, "filter-papers": 0, "milk-jug": 7}


class SkuInput(BaseModel):
    sku: str = Field(description="Product code, e.g. espresso-beans.", pattern=r"^[a-z0-9-]{2,40}$")


class StockLevel(ReadTool):
    """Reads the stock of one product and shows it as a card."""

    description = "How many units of a product are in stock."
    input = SkuInput
    presentation = ToolPresentation(label="Stock", running="Counting {sku}", done="Counted {sku}", icon="box")

    async def execute(self, input: SkuInput, ctx: ToolContext) -> dict[str, Any]:
        return {"sku": input.sku, "units": STOCK.get(input.sku, 0)}

    def present(self, output: dict[str, Any], ctx: ToolContext) -> UiComponent:
        return UiComponent(
            component="KpiCards",
            props={"items": [{"label": output["sku"], "value": output["units"], "unit": "units"}]},
            fallback_text=f"{output['sku']}: {output['units']} units",
        )


class ReorderInput(SkuInput):
    units: int = Field(gt=0, le=500, description="How many units to order.")


class Reorder(ActionTool):
    """Places a purchase order; a person approves it first."""

    description = "Order more units of a product from the supplier."
    input = ReorderInput
    roles = ["member"]
    presentation = ToolPresentation(
        label="Reorder",
        running="Ordering {units} x {sku}",
        done="Ordered {units} x {sku}",
        tone="destructive",
        confirm=ConfirmTemplate(title="Order {units} x {sku}?", verb="Order", detail="Charged to the shop account"),
    )

    def preflight(self, input: ReorderInput, ctx: ToolContext, phase: str) -> Any:
        if input.sku not in STOCK:
            return PreflightDenied(reason=f"We do not sell {input.sku}.")
        return None  # ready: the confirm templates word the approval

    async def execute(self, input: ReorderInput, ctx: ToolContext) -> dict[str, Any]:
        # ctx.idempotency_key is the same if this call is retried or resumed: pass it to the
        # supplier so a second attempt does not order twice.
        STOCK[input.sku] = STOCK.get(input.sku, 0) + input.units
        return {"sku": input.sku, "ordered": input.units, "reference": ctx.idempotency_key}


class DiscontinueInput(SkuInput):
    pass


def _prepare(input: DiscontinueInput, ctx: ToolContext) -> dict[str, Any]:
    if input.sku not in STOCK:
        raise ValueError(f"unknown product {input.sku}")
    return {"sku": input.sku, "units": STOCK[input.sku]}


discontinue = define_confirmed_tool(
    name="discontinue_product",
    description="Stop selling a product. Returns a preview and a confirm_token first; call again with confirm=true.",
    input=DiscontinueInput,
    secret=lambda: os.environ.get("AGORA_SECRET", "example-only-secret"),
    prepare=_prepare,
    preview=lambda p: f"Discontinue {p['sku']} ({p['units']} units left)?",
    commit=lambda p: {"summary": f"{p['sku']} is discontinued.", "data": STOCK.pop(p["sku"], None)},
)
