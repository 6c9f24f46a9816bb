"""A shop assistant that shows products as cards: a custom component with a photo from the app's static folder.

Serve it from the repository root::

    agora-gateway serve --app examples.product_card.app:gateway

and ask for "the mug" or "the teapot". Without ``AGORA_MODEL`` an offline stand-in model picks
the product named in the message; with ``AGORA_MODEL=openai:gpt-4o-mini`` a real model does.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import Field

from gateway import Agent, Branding, Gateway
from gateway.events import Usage
from gateway.models import ModelChunk, ModelRequest, TextChunk, ToolCallRequest, ToolMessage
from renderers import ComponentDef, ComponentProps, default_catalog, format_value
from tools import ReadTool, ToolContext, ToolPresentation, UiComponent

HERE = Path(__file__).resolve().parent
STATIC_DIR = HERE / "static"
"""Served at ``/assets/``: the product photos."""


# -- the component ----------------------------------------------------------------------------------


class ProductCardProps(ComponentProps):
    """Props of ``ProductCard``: ``{name, price, image, badge?}`` (``currency`` defaults to EUR)."""

    name: str = Field(min_length=1, max_length=120)
    price: Decimal = Field(ge=0, max_digits=12, decimal_places=2)
    image: str = Field(pattern=r"^/assets/[A-Za-z0-9][A-Za-z0-9._/-]{0,200}$")
    """A photo in the app's static folder, as the gateway serves it: ``/assets/product.png``."""
    badge: str | None = Field(default=None, max_length=24)
    currency: str = Field(default="EUR", pattern=r"^[A-Z]{3}$")


def product_text(props: ProductCardProps) -> str:
    """The card as text (WhatsApp captions, text-only clients, and when the template fails)."""
    badge = f" · {props.badge}" if props.badge else ""
    return f"**{props.name}**{badge}\n{format_value(props.price, 'currency', currency=props.currency)}"


PRODUCT_CARD = ComponentDef(
    "ProductCard",
    1,
    ProductCardProps,
    (HERE / "product_card.html.j2").read_text(encoding="utf-8"),
    product_text,
    "image",
    css=(HERE / "product_card.css").read_text(encoding="utf-8"),
    description="A product: its photo, name, price and an optional badge.",
)

catalog = default_catalog().extend([PRODUCT_CARD])
"""The built-in components and ``ProductCard`` (``python -m renderers list --catalog examples.product_card.app``)."""


# -- the tool ---------------------------------------------------------------------------------------

PRODUCTS: dict[str, dict[str, Any]] = {
    "mug": {"name": "Lisbon tile mug", "price": "14.50", "image": "/assets/product.png", "badge": "New"},
    "teapot": {"name": "Stoneware teapot", "price": "39.00", "image": "/assets/product.png"},
}
"""Stand-in data: replace with your own catalogue."""


class ProductInput(ComponentProps):
    sku: str = Field(description="The product's code: mug or teapot.", pattern=r"^[a-z0-9-]{1,40}$")


class ShowProduct(ReadTool):
    """Looks one product up and shows it as a card."""

    name = "show_product"
    description = "Show one product of the shop (its photo, name and price) by its code: mug or teapot."
    input = ProductInput
    presentation = ToolPresentation(label="Product", running="Looking up {sku}", done="Showed {sku}")

    async def execute(self, input: ProductInput, ctx: ToolContext) -> dict[str, Any]:
        product = PRODUCTS.get(input.sku)
        return {"sku": input.sku, "found": product is not None, **(product or {})}

    def present(self, output: dict[str, Any], ctx: ToolContext) -> UiComponent | None:
        if not output["found"]:
            return None
        props = {key: output[key] for key in ("name", "price", "image", "badge") if output.get(key) is not None}
        return UiComponent(component="ProductCard", props=props)


# -- an offline stand-in for a model ------------------------------------------------------------------


class OfflineModel:
    """Calls ``show_product`` for the product a message names; no language model needed."""

    name = "product-card-offline"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        last = request.messages[-1] if request.messages else None
        if isinstance(last, ToolMessage):
            text = "Here it is." if json.loads(last.content).get("found") else "We don't sell that."
        else:
            said = request.last_user_text.lower()
            sku = next((sku for sku in PRODUCTS if sku in said), None)
            if sku is not None:
                yield ToolCallRequest(name="show_product", args={"sku": sku})
                yield Usage(model_calls=1)
                return
            text = f"Ask me to show a product: {' or '.join(PRODUCTS)}."
        yield TextChunk(text)
        yield Usage(model_calls=1)


gateway = Gateway(
    tools=[ShowProduct],
    agents=[Agent(name="shop", instructions="You show the shop's products with show_product. Keep answers short.")],
    model=OfflineModel(),
    catalog=catalog,
    static_dir=STATIC_DIR,
    branding=Branding(
        name="Tile & Clay shop",
        welcome="Hi! Ask me to show a product.",
        prompts=["show me the mug", "and the teapot?"],
        accent="#c2410c",
    ),
)
