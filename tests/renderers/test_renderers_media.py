"""PNG and PDF renders, through the shared worker pool."""

import asyncio
from typing import Any

import pytest
from aiohttp import web
from renderers_support import (
    EXPECTED_TEXT,
    RTL_EMOJI,
    SAMPLES,
    TEN_K_WORD,
    hostile_props,
    pdf_pages,
    pdf_text,
    pixel_variance,
    png_image,
)

from renderers import ComponentDef, ComponentProps, PropsInvalidError, Renderer, RenderPool, default_catalog

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.mark.parametrize("component", sorted(SAMPLES))
async def test_every_builtin_renders_a_pdf_holding_its_values(renderer: Renderer, component: str) -> None:
    rendered = await renderer.render(component, SAMPLES[component], "pdf")
    assert rendered.mime == "application/pdf"
    assert isinstance(rendered.data, bytes) and rendered.data.startswith(b"%PDF-")
    assert rendered.pages == (rendered.data,) and rendered.page_count >= 1
    text = pdf_text(rendered.data)
    for expected in EXPECTED_TEXT[component]:
        assert expected in text, (expected, text)


@pytest.mark.parametrize("component", sorted(SAMPLES))
async def test_every_builtin_renders_a_phone_width_png(renderer: Renderer, component: str) -> None:
    rendered = await renderer.render(component, SAMPLES[component], "png")
    assert rendered.mime == "image/png" and rendered.data == rendered.pages[0]
    assert rendered.page_count == len(rendered.pages) >= 1
    for page in rendered.pages:
        image = png_image(page)
        assert image.width == 1080
        assert 200 < image.height <= 4000
        assert pixel_variance(image) > 100  # not blank


async def test_a_long_document_paginates_with_repeated_table_headers(patient_renderer: Renderer) -> None:
    renderer = patient_renderer
    rows = [{"item": f"Line item {i:03d}", "amount": 10 + i} for i in range(90)]
    props: dict[str, Any] = {
        "title": "Quarterly report",
        "sections": [
            {
                "heading": "Items",
                "table": {
                    "columns": [
                        {"key": "item", "label": "Description"},
                        {"key": "amount", "label": "Amount due", "format": "currency"},
                    ],
                    "rows": rows,
                },
            }
        ],
        "totals": [{"label": "Total", "value": sum(r["amount"] for r in rows)}],
    }
    pdf = await renderer.render("Document", props, "pdf")
    assert isinstance(pdf.data, bytes)
    pages = pdf_pages(pdf.data)
    assert pdf.page_count == len(pages) >= 3
    for number, page in enumerate(pages, start=1):
        assert f"Page {number} of {len(pages)}" in page
    for page in pages[:-1]:
        assert "DESCRIPTION" in page and "AMOUNT DUE" in page  # the header row repeats
    assert "Line item 000" in pages[0] and "Line item 089" in "".join(pages)
    png = await renderer.render("Document", props, "png")
    assert len(png.pages) > 1 and png.data == png.pages[0]
    assert all(png_image(page).width == 1080 for page in png.pages)


async def test_a_long_table_pdf_repeats_its_header(patient_renderer: Renderer) -> None:
    renderer = patient_renderer
    props = {
        "title": "Ledger",
        "columns": [{"key": "n", "label": "Entry"}, {"key": "v", "label": "Value", "format": "number"}],
        "rows": [{"n": f"entry {i}", "v": i} for i in range(120)],
    }
    pages = pdf_pages((await renderer.render("DataTable", props, "pdf")).data)  # type: ignore[arg-type]
    assert len(pages) >= 2 and all("ENTRY" in page and "VALUE" in page for page in pages)


@pytest.mark.parametrize("component", sorted(SAMPLES))
async def test_hostile_props_render_as_text_in_pdf_and_png(patient_renderer: Renderer, component: str) -> None:
    renderer = patient_renderer
    props = hostile_props()[component]
    pdf = await renderer.render(component, props, "pdf")
    assert isinstance(pdf.data, bytes)
    text = pdf_text(pdf.data)
    assert "<script>" in text  # the markup was drawn as characters, not interpreted
    png = await renderer.render(component, props, "png")
    assert all(png_image(page).width == 1080 for page in png.pages)
    assert pixel_variance(png_image(png.data)) > 100


async def test_right_to_left_text_reaches_the_pdf(renderer: Renderer) -> None:
    pdf = await renderer.render("Callout", {"title": RTL_EMOJI, "text": "שלום"}, "pdf")
    text = pdf_text(pdf.data)  # type: ignore[arg-type]
    assert "שלום" in text or "םולש" in text  # extraction order of RTL runs varies
    assert "✓" in text


async def test_a_ten_thousand_character_word_wraps_instead_of_overflowing(patient_renderer: Renderer) -> None:
    pdf = await patient_renderer.render("Callout", {"title": "Long", "text": f"{TEN_K_WORD} tail"}, "pdf")
    text = pdf_text(pdf.data)  # type: ignore[arg-type]
    assert text.count("W") == 10_000 and "W tail Page" in text
    assert pdf.page_count > 1  # it wrapped onto lines and pages instead of running off the page


async def test_a_ten_thousand_character_cell_is_a_clear_error(renderer: Renderer) -> None:
    props = {"columns": [{"key": "a", "label": "A"}], "rows": [{"a": "ok"}, {"a": TEN_K_WORD}]}
    with pytest.raises(PropsInvalidError, match=r"rows\.1\.a: String should have at most 1000 characters$"):
        await renderer.render("DataTable", props, "png")


class PictureProps(ComponentProps):
    src: str


async def test_renders_never_fetch_from_the_network(shared_pool: RenderPool) -> None:
    hits: list[str] = []

    async def record(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(body=b"", content_type="image/png")

    app = web.Application()
    app.router.add_get("/{name}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        template = (
            '<div class="ag-c"><img src="{{ props.src }}" alt="picture">'
            '<img src="http://127.0.0.1:' + str(port) + '/static.png"></div>'
        )
        catalog = default_catalog().extend([ComponentDef("Picture", 1, PictureProps, template)])
        async with Renderer(catalog, pool=shared_pool) as renderer:
            pdf = await renderer.render("Picture", {"src": f"http://127.0.0.1:{port}/from-props.png"}, "pdf")
            png = await renderer.render("Picture", {"src": "file:///etc/passwd"}, "png")
        assert pdf.data.startswith(b"%PDF") and png_image(png.data).width == 1080  # type: ignore[union-attr]
        await asyncio.sleep(0)  # let any (wrongly) accepted connection be handled before looking
        assert hits == []
    finally:
        await runner.cleanup()


async def test_pdf_of_custom_component_gets_the_print_stylesheet(renderer: Renderer) -> None:
    pdf = await renderer.render("KpiCards", SAMPLES["KpiCards"], "pdf")
    pages = pdf_pages(pdf.data)  # type: ignore[arg-type]
    assert pages[0].endswith("Page 1 of 1")
