"""Helpers and sample props shared by the renderer tests."""

from __future__ import annotations

import io
from typing import Any

import pypdfium2 as pdfium
from PIL import Image, ImageStat


def pdf_text(data: bytes) -> str:
    """All text of a PDF, pages joined, whitespace collapsed (pypdfium2)."""
    document = pdfium.PdfDocument(data)
    try:
        texts = []
        for index in range(len(document)):
            page = document[index]
            textpage = page.get_textpage()
            texts.append(textpage.get_text_range())
            textpage.close()
            page.close()
    finally:
        document.close()
    return " ".join(" ".join(texts).replace("\u200b", "").split())


def pdf_pages(data: bytes) -> list[str]:
    """Each page's text, whitespace collapsed."""
    document = pdfium.PdfDocument(data)
    try:
        pages = []
        for index in range(len(document)):
            page = document[index]
            textpage = page.get_textpage()
            pages.append(" ".join(textpage.get_text_range().split()))
            textpage.close()
            page.close()
        return pages
    finally:
        document.close()


def png_image(data: bytes) -> Image.Image:
    """Decode a PNG with Pillow (and check it is one)."""
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG"
    image.load()
    return image


def pixel_variance(image: Image.Image) -> float:
    """Variance of the grey levels: near 0 for a blank image."""
    return float(ImageStat.Stat(image.convert("L")).var[0])


SAMPLES: dict[str, dict[str, Any]] = {
    "DataTable": {
        "title": "Top customers",
        "columns": [
            {"key": "name", "label": "Customer"},
            {"key": "orders", "label": "Orders", "format": "number"},
            {"key": "revenue", "label": "Revenue", "format": "currency", "currency": "EUR"},
            {"key": "since", "label": "Since", "format": "date"},
        ],
        "rows": [
            {"name": "Northwind", "orders": 1480, "revenue": 48210.5, "since": "2019-03-14"},
            {"name": "Lisboa Café", "orders": 97, "revenue": 31980, "since": "2021-07-02"},
        ],
    },
    "Chart": {
        "type": "bar",
        "title": "Monthly revenue",
        "xKey": "month",
        "unit": "USD",
        "series": [{"key": "revenue", "label": "Revenue"}, {"key": "costs", "label": "Costs"}],
        "data": [
            {"month": "Jan", "revenue": 4200, "costs": 3100},
            {"month": "Feb", "revenue": 4700, "costs": 3300},
            {"month": "Mar", "revenue": 5100, "costs": 3500},
        ],
    },
    "KpiCards": {
        "items": [
            {"label": "Revenue", "value": 128430, "unit": "USD", "delta": 12.4},
            {"label": "Churn", "value": "1.8", "unit": "%", "delta": "-0.4 pts"},
        ]
    },
    "Callout": {"tone": "warning", "title": "Payment retry", "text": "The card was declined on May 3."},
    "Checklist": {
        "title": "Launch",
        "items": [{"text": "Domain verified", "done": True}, {"text": "Load test", "done": False}],
    },
    "Timeline": {
        "items": [
            {"at": "2024-05-02T09:14:00", "title": "Order placed", "text": "Paid by card."},
            {"at": "2024-05-03", "title": "Shipped"},
        ]
    },
    "CodeBlock": {"code": "def hello(name):\n    return f'Hello {name}'\n", "language": "python"},
    "Document": {
        "title": "Invoice INV-0042",
        "subtitle": "Agora Systems",
        "currency": "EUR",
        "meta": [{"label": "Billed to", "value": "Northwind"}],
        "sections": [
            {"heading": "Summary", "text": "Thank you for your business."},
            {
                "heading": "Items",
                "table": {
                    "columns": [
                        {"key": "item", "label": "Item"},
                        {"key": "amount", "label": "Amount", "format": "currency", "currency": "EUR"},
                    ],
                    "rows": [{"item": "Licence", "amount": 1200}, {"item": "Support", "amount": 300}],
                },
            },
        ],
        "totals": [{"label": "Subtotal", "value": 1500}, {"label": "Total", "value": 1845}],
    },
}
"""Small props of every built-in."""

EXPECTED_TEXT: dict[str, list[str]] = {
    "DataTable": ["Top customers", "Northwind", "1,480", "€48,210.50", "Lisboa Café", "Mar 14, 2019"],
    "Chart": ["Monthly revenue", "Revenue", "Costs", "Jan", "Feb", "Mar"],
    "KpiCards": ["Revenue", "128,430", "USD", "+12.4%", "Churn", "-0.4 pts"],
    "Callout": ["Payment retry", "The card was declined on May 3."],
    "Checklist": ["Launch", "Domain verified", "Load test", "1 of 2 done"],
    "Timeline": ["May 2, 2024, 09:14", "Order placed", "Paid by card.", "May 3, 2024", "Shipped"],
    "CodeBlock": ["def hello(name):", "return f'Hello {name}'", "python"],
    "Document": ["Invoice INV-0042", "Agora Systems", "Northwind", "Summary", "Licence", "€1,200.00", "€1,845.00"],
}
"""Strings each sample's PDF must contain (values as formatted)."""


TEN_K_WORD = "W" * 10_000
"""A 10,000-character word."""

LONG_CELL = "C" * 1_000
"""The longest word a table cell takes."""

HOSTILE = (
    '<script>alert("x")</script></svg></div>" onmouseover="alert(1)" javascript:alert(1) url(https://evil.example/x)'
)
"""Markup, an attribute break-out, a script URL and a CSS URL, in one string."""

RTL_EMOJI = "שלום עולם · مرحبا بالعالم · 🎉 👩‍💻 ✓"


def hostile_props() -> dict[str, dict[str, Any]]:
    """Every built-in's props with hostile strings in every text field (within its limits)."""
    table = {
        "title": HOSTILE,
        "columns": [
            {"key": "a", "label": HOSTILE},
            {"key": "b", "label": RTL_EMOJI, "format": "number"},
        ],
        "rows": [{"a": HOSTILE, "b": RTL_EMOJI}, {"a": LONG_CELL, "b": 12.5}],
        "empty": HOSTILE,
    }
    return {
        "DataTable": table,
        "Chart": {
            "type": "line",
            "title": HOSTILE,
            "x_key": "x",
            "unit": "</svg>",
            "x_label": HOSTILE[:80],
            "y_label": RTL_EMOJI,
            "series": [{"key": "v", "label": HOSTILE[:100]}, {"key": "w", "label": RTL_EMOJI}],
            "data": [{"x": HOSTILE, "v": 1, "w": 2}, {"x": RTL_EMOJI, "v": None, "w": 3}, {"x": "</svg>", "v": 5}],
        },
        "KpiCards": {
            "title": HOSTILE,
            "items": [
                {"label": HOSTILE[:100], "value": HOSTILE[:100], "unit": "</svg>", "delta": HOSTILE[:40]},
                {"label": RTL_EMOJI, "value": 3.5, "delta": -1},
            ],
        },
        "Callout": {"tone": "danger", "title": HOSTILE, "text": f"{HOSTILE}\n{RTL_EMOJI}\n{TEN_K_WORD}"},
        "Checklist": {"title": HOSTILE, "items": [{"text": HOSTILE, "done": True}, {"text": RTL_EMOJI}]},
        "Timeline": {"items": [{"at": HOSTILE[:100], "title": HOSTILE, "text": RTL_EMOJI}]},
        "CodeBlock": {"code": f"{HOSTILE}\n{RTL_EMOJI}\n{TEN_K_WORD}", "language": "html", "title": HOSTILE},
        "Document": {
            "title": HOSTILE,
            "subtitle": RTL_EMOJI,
            "meta": [{"label": HOSTILE[:100], "value": HOSTILE[:300]}],
            "sections": [{"heading": HOSTILE, "text": f"{HOSTILE}\n\n{TEN_K_WORD}", "table": table}],
            "totals": [{"label": HOSTILE[:100], "value": HOSTILE[:300]}],
        },
    }
