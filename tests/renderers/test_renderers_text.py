import json

import pytest
from renderers_support import SAMPLES

from renderers import PropsInvalidError, Renderer, UnknownComponentError


async def text_of(component: str, props: object, **kwargs: object) -> str:
    async with Renderer() as renderer:
        rendered = await renderer.render(component, props, "text", **kwargs)  # type: ignore[arg-type]
    assert rendered.mime == "text/plain" and isinstance(rendered.data, str)
    return rendered.data


@pytest.mark.parametrize("component", sorted(SAMPLES))
async def test_builtins_have_a_text_form_that_is_not_json(component: str) -> None:
    text = await text_of(component, SAMPLES[component])
    assert text.strip()
    assert '{"' not in text and '": ' not in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


async def test_datatable_text_is_a_fixed_width_table_of_fifteen_rows() -> None:
    props = {
        "title": "Orders",
        "columns": [
            {"key": "id", "label": "Order"},
            {"key": "total", "label": "Total", "format": "currency"},
            {"key": "day", "label": "Day", "format": "date"},
        ],
        "rows": [{"id": f"A-{i}", "total": i * 10.5, "day": f"2024-05-{i + 1:02d}"} for i in range(20)],
    }
    text = await text_of("DataTable", props)
    lines = text.splitlines()
    assert lines[:5] == [
        "**Orders**",
        "```",
        "Order |   Total | Day",
        "------+---------+-------------",
        "A-0   |   $0.00 | May 1, 2024",
    ]
    assert lines[-3:] == ["A-14  | $147.00 | May 15, 2024", "```", "... 5 more rows"]
    assert len([line for line in lines if line.startswith("A-")]) == 15


async def test_datatable_text_clips_wide_cells_and_counts_display_width() -> None:
    props = {
        "columns": [{"key": "a", "label": "Name"}, {"key": "b", "label": "N", "format": "number"}],
        "rows": [{"a": "x" * 100, "b": 1}, {"a": "東京", "b": 22}],
    }
    text = await text_of("DataTable", props)
    assert text.splitlines() == [
        "```",
        "Name                     |  N",
        "-------------------------+---",
        "xxxxxxxxxxxxxxxxxxxxxxx… |  1",
        "東京                     | 22",  # two wide characters take four columns
        "```",
    ]


async def test_text_forms_read_well() -> None:
    assert (
        await text_of("Callout", {"tone": "success", "title": "Saved", "text": "All good."})
        == "✅ **Saved**\nAll good."
    )
    assert await text_of("Checklist", SAMPLES["Checklist"]) == "**Launch** (1/2)\n[x] Domain verified\n[ ] Load test"
    assert await text_of("KpiCards", SAMPLES["KpiCards"]) == (
        "• Revenue: **128,430 USD** (+12.4%)\n• Churn: **1.8%** (-0.4 pts)"
    )
    assert await text_of("Timeline", SAMPLES["Timeline"]) == (
        "• May 2, 2024, 09:14 — **Order placed**\n  Paid by card.\n• May 3, 2024 — **Shipped**"
    )
    assert await text_of("CodeBlock", {"code": "print(1)\n"}) == "```\nprint(1)\n```"
    chart = await text_of("Chart", SAMPLES["Chart"])
    assert chart.splitlines()[:2] == ["**Monthly revenue**", "Jan: Revenue 4,200 USD · Costs 3,100 USD"]
    document = await text_of("Document", SAMPLES["Document"])
    assert document.startswith("**Invoice INV-0042**\nAgora Systems\n\nBilled to: Northwind\n\n**Summary**\n")
    assert document.endswith("Subtotal: €1,500.00\n**Total: €1,845.00**")


async def test_chart_text_stops_after_fifteen_points() -> None:
    data = [{"x": i, "v": i} for i in range(40)]
    text = await text_of("Chart", {"type": "line", "x_key": "x", "series": [{"key": "v", "label": "V"}], "data": data})
    assert text.splitlines()[-1] == "... 25 more points"


async def test_fallback_text_wins_but_props_are_still_validated() -> None:
    assert await text_of("Callout", {"text": "x"}, fallback_text="Plain words") == "Plain words"
    with pytest.raises(PropsInvalidError):
        await text_of("Callout", {"tone": "loud", "text": "x"}, fallback_text="Plain words")


async def test_unknown_components_read_as_their_fallback_or_their_props() -> None:
    assert await text_of("WeatherMap", {"city": "Lisbon"}, fallback_text="Sunny in Lisbon") == "Sunny in Lisbon"
    assert (
        await text_of("WeatherMap", {"title": "Lisbon", "t": 21})
        == '**Lisbon**\n```\n{\n "title": "Lisbon",\n "t": 21\n}\n```'
    )
    async with Renderer() as renderer:
        with pytest.raises(UnknownComponentError):
            await renderer.render("WeatherMap", {}, "html")
