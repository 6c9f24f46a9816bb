"""The product card example as every channel's tests use it, and components whose templates fail.

``PRODUCT`` is ``examples/product_card``: its ``gateway`` (the ``ProductCard`` component, the
``show_product`` tool, the static folder served at ``/assets/``, an offline model that shows
the product a message names). ``mug_pixels`` counts the pixels of the example photo's mug
colour in a rendered image: a card that lost its photo has none (no stylesheet uses it).

``broken_app()`` serves components whose templates fail in each way a template can: an
undefined name (templates run under ``StrictUndefined``), a division by zero at render, a
filter that does not exist (found when the template is compiled, not when it is declared).
"""

from __future__ import annotations

import io
import logging
from typing import Any

import pypdfium2 as pdfium
from PIL import Image
from pydantic import BaseModel

from examples.product_card import app as PRODUCT
from examples.product_card.make_image import MUG
from gateway import Agent, Gateway
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest, ToolMessage
from renderers import ComponentDef, ComponentProps, default_catalog
from tools import ToolContext, ToolPresentation, UiComponent, define_tool

__all__ = [
    "BROKEN",
    "MUG_PROPS",
    "MUG_TEXT",
    "PHOTO",
    "PRODUCT",
    "broken_app",
    "broken_lines",
    "broken_text",
    "mug_pixels",
    "pdf_mug_pixels",
]

PHOTO = (PRODUCT.STATIC_DIR / "product.png").read_bytes()
"""The bytes ``/assets/product.png`` serves."""
MUG_PROPS: dict[str, Any] = {
    "name": "Lisbon tile mug",
    "price": "14.50",
    "image": "/assets/product.png",
    "badge": "New",
}
"""What ``show_product`` presents for ``mug``."""
MUG_TEXT = "**Lisbon tile mug** · New\n€14.50"
"""The card's own text form for those props."""
ENOUGH_MUG = 5_000
"""Mug pixels a render that shows the photo has at least (a 1080 px card has about 160,000)."""


def _count(image: Image.Image, tolerance: int = 8) -> int:
    r, g, b = MUG
    pixels = image.convert("RGB").tobytes()
    found = 0
    for i in range(0, len(pixels), 3):
        if (
            abs(pixels[i] - r) <= tolerance
            and abs(pixels[i + 1] - g) <= tolerance
            and abs(pixels[i + 2] - b) <= tolerance
        ):
            found += 1
    return found


def mug_pixels(png: bytes) -> int:
    """Pixels of the mug's colour in a PNG."""
    assert png.startswith(b"\x89PNG\r\n\x1a\n"), png[:16]
    return _count(Image.open(io.BytesIO(png)))


def pdf_mug_pixels(pdf: bytes) -> int:
    """Pixels of the mug's colour on the first page of a PDF, rasterised at 2x."""
    assert pdf.startswith(b"%PDF-"), pdf[:16]
    document = pdfium.PdfDocument(pdf)
    try:
        page = document[0]
        try:
            return _count(page.render(scale=2).to_pil())
        finally:
            page.close()
    finally:
        document.close()


# -- components whose templates fail -------------------------------------------------------------------


class BrokenProps(ComponentProps):
    name: str
    count: int = 1


def broken_text(props: BrokenProps) -> str:
    return f"Card {props.name} (as text)"


BROKEN = {
    "UndefinedCard": '<div class="ag-c">{{ props.nope }}</div>',
    "RaisingCard": '<div class="ag-c">{{ props.count // 0 }}</div>',
    "UnknownFilterCard": '<div class="ag-c">{{ props.name | no_such_filter }}</div>',
}
"""Name -> a template that fails when it is rendered (or, the last, compiled)."""


class CardInput(BaseModel):
    component: str


@define_tool(
    name="show_card",
    description="Show a card.",
    input=CardInput,
    presentation=ToolPresentation(label="Card", running="Drawing", done="Drew {component}"),
    present=lambda output, ctx: UiComponent(
        component=output["component"], props=MUG_PROPS if output["component"] == "ProductCard" else {"name": "x"}
    ),
)
async def show_card(input: CardInput, ctx: ToolContext) -> dict[str, Any]:
    return {"component": input.component}


def _script(request: ModelRequest, index: int) -> ScriptStep:
    """Shows the component the message names, then says so."""
    if request.messages and isinstance(request.messages[-1], ToolMessage):
        return ScriptStep(text="Shown.")
    return ScriptStep(
        tool_calls=[ToolCallRequest(name="show_card", args={"component": request.last_user_text.strip()})]
    )


def broken_app() -> Gateway:
    """An app whose catalog holds ``BROKEN`` (each with a working text form) and ``ProductCard``."""
    broken = [ComponentDef(name, 1, BrokenProps, template, broken_text) for name, template in BROKEN.items()]
    return Gateway(
        tools=[show_card],
        agents=[Agent(name="assistant")],
        model=ScriptedModel(_script),
        catalog=default_catalog().extend([*broken, PRODUCT.PRODUCT_CARD]),
        static_dir=PRODUCT.STATIC_DIR,
    )


def broken_lines(records: list[logging.LogRecord], component: str) -> list[logging.LogRecord]:
    """The log lines that say ``component`` failed."""
    return [r for r in records if r.name == "gateway.services" and f"component {component} " in r.getMessage()]
