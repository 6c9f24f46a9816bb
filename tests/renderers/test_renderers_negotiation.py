from typing import Any

import pytest

from renderers import DELIVERY_FORMATS, Delivery, default_catalog, negotiate
from tools import UiCapabilities, UiComponent

CATALOG = default_catalog()
SHORT_TABLE = {"columns": [{"key": "a", "label": "A"}], "rows": [{"a": i} for i in range(3)]}
LONG_TABLE = {"columns": [{"key": "a", "label": "A"}], "rows": [{"a": i} for i in range(40)]}
CHART = {"type": "bar", "x_key": "m", "series": [{"key": "v", "label": "V"}], "data": [{"m": "Jan", "v": 1}]}
DOCUMENT = {"title": "Invoice", "sections": [{"text": "Hello"}]}


def caps(*formats: str, components: list[dict[str, Any]] | None = None) -> UiCapabilities:
    return UiCapabilities.model_validate({"formats": list(formats), "components": components})


CASES: list[tuple[str, str, dict[str, Any], UiCapabilities | None, Delivery]] = [
    # id, component, props, capabilities, expected
    ("web widget: html", "Chart", CHART, caps("html"), "html"),
    ("declared natively wins over html", "Chart", CHART, caps("html", components=[{"name": "Chart"}]), "props"),
    (
        "declared at another version: html",
        "Chart",
        CHART,
        caps("html", components=[{"name": "Chart", "version": 2}]),
        "html",
    ),
    ("whatsapp: a chart is an image", "Chart", CHART, caps("image", "pdf", "text"), "image"),
    ("whatsapp: a document is a pdf", "Document", DOCUMENT, caps("image", "pdf", "text"), "pdf"),
    ("whatsapp: a short table is an image", "DataTable", SHORT_TABLE, caps("image", "pdf", "text"), "image"),
    ("whatsapp: a long table is a pdf", "DataTable", LONG_TABLE, caps("image", "pdf", "text"), "pdf"),
    ("images only: a document falls back to an image", "Document", DOCUMENT, caps("image", "text"), "image"),
    ("pdf only: a chart falls back to a pdf", "Chart", CHART, caps("pdf", "text"), "pdf"),
    ("text only", "Chart", CHART, caps("text"), "text"),
    ("nothing accepted still gets text", "Chart", CHART, caps(), "text"),
    ("no capabilities at all: text", "Chart", CHART, None, "text"),
    ("html beats media whatever the order", "Chart", CHART, caps("image", "html"), "html"),
    ("unknown component declared: props", "Map", {}, caps("html", components=[{"name": "Map"}]), "props"),
    ("unknown component, html client: text", "Map", {}, caps("html", "image"), "text"),
    ("invalid props: the static preference", "DataTable", {"rows": "nope"}, caps("image", "pdf"), "image"),
]


@pytest.mark.parametrize(
    ("component", "props", "capabilities", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_negotiation_table(
    component: str, props: dict[str, Any], capabilities: UiCapabilities | None, expected: Delivery
) -> None:
    ui = UiComponent(component=component, props=props)
    assert negotiate(ui, capabilities, CATALOG) == expected


def test_a_ui_event_shaped_mapping_works_too() -> None:
    event = {"type": "ui", "id": "u1", "component": "DataTable", "version": 1, "props": LONG_TABLE}
    assert negotiate(event, caps("image", "pdf"), CATALOG) == "pdf"


def test_version_matters_for_the_catalog() -> None:
    ui = UiComponent(component="Chart", props=CHART, version=2)
    assert negotiate(ui, caps("html", "image"), CATALOG) == "text"


def test_delivery_formats_map_to_render_formats() -> None:
    assert DELIVERY_FORMATS == {"props": None, "html": "html", "image": "png", "pdf": "pdf", "text": "text"}
