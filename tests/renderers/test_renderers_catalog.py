import time
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from renderers import (
    Catalog,
    ComponentDef,
    ComponentDefinitionError,
    ComponentProps,
    PropsInvalidError,
    Renderer,
    UnknownComponentError,
    default_catalog,
)
from tools import ComponentRef, UiCapabilities, UserError


class BadgeProps(ComponentProps):
    label: str
    tone_name: str = "neutral"


def badge(version: int = 1, template: str = '<span class="ag-c">{{ props.label }}</span>') -> ComponentDef[Any]:
    return ComponentDef("Badge", version, BadgeProps, template, lambda p: f"[{p.label}]")


def test_default_catalog_has_the_eight_builtins() -> None:
    catalog = default_catalog()
    assert catalog.names == (
        "DataTable",
        "Chart",
        "KpiCards",
        "Callout",
        "Checklist",
        "Timeline",
        "CodeBlock",
        "Document",
    )
    assert all(definition.version == 1 for definition in catalog)
    assert len(catalog) == 8 and "Chart" in catalog and "Nope" not in catalog


def test_component_def_takes_positional_or_keyword_arguments() -> None:
    positional = badge()
    keyword = ComponentDef(name="Badge", props=BadgeProps, template="<b>{{ props.label }}</b>")
    assert positional.name == keyword.name == "Badge"
    assert keyword.version == 1 and keyword.media == "image" and keyword.fallback_text is None
    assert keyword.sanitize is True  # only audited templates (the built-ins) skip the sanitizer
    assert not any(definition.sanitize for definition in default_catalog())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "9lives"}, "does not match"),
        ({"name": "has space"}, "does not match"),
        ({"name": "Trailing\n"}, "does not match"),
        ({"name": "A" * 65}, "does not match"),
        ({"version": 0}, "version"),
        ({"version": True}, "version"),
        ({"props": dict}, "pydantic model"),
        ({"template": ""}, "template"),
        ({"template": "{% if %}"}, "template line 1"),
        ({"media": "video"}, "media"),
    ],
)
def test_component_def_refuses_bad_definitions(kwargs: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"name": "Badge", "props": BadgeProps, "template": "<b>x</b>", **kwargs}
    with pytest.raises(ComponentDefinitionError, match=message) as raised:
        ComponentDef(**arguments)
    assert isinstance(raised.value, UserError)


def test_catalog_refuses_duplicate_names() -> None:
    with pytest.raises(ComponentDefinitionError, match="'Badge' is defined twice"):
        Catalog([badge(), badge(version=2)])


def test_extend_replaces_by_name_and_keeps_the_original() -> None:
    base = default_catalog().extend([badge()])
    replaced = base.extend([badge(version=2, template="<i>{{ props.label }}</i>")])
    assert base.get("Badge").version == 1
    assert replaced.get("Badge").version == 2
    assert replaced.names == base.names
    with pytest.raises(ComponentDefinitionError):
        base.extend([badge(), badge()])


def test_get_names_unknown_components_and_versions() -> None:
    catalog = default_catalog()
    with pytest.raises(UnknownComponentError, match="Unknown component 'Nope'") as raised:
        catalog.get("Nope")
    assert raised.value.code == "unknown_component" and raised.value.component == "Nope"
    with pytest.raises(UnknownComponentError, match="version 1, not 2"):
        catalog.get("Chart", 2)
    assert catalog.find("Chart", 2) is None and catalog.find("Chart", 1) is not None


def test_props_accept_camel_case_and_snake_case() -> None:
    chart = default_catalog().get("Chart")
    data = {"type": "line", "series": [{"key": "v", "label": "V"}], "data": [{"x": 1, "v": 2}]}
    assert chart.validate({**data, "xKey": "x"}) == chart.validate({**data, "x_key": "x"})


def test_bad_props_name_the_field() -> None:
    table = default_catalog().get("DataTable")
    with pytest.raises(PropsInvalidError) as raised:
        table.validate({"columns": [{"key": "a", "label": "A", "align": "middle"}], "rows": []})
    assert "columns.0.align" in str(raised.value)
    assert raised.value.errors[0]["loc"] == ("columns", 0, "align")
    assert "input" not in raised.value.errors[0]
    with pytest.raises(PropsInvalidError, match="x_key: Field required"):
        default_catalog().get("Chart").validate({"type": "bar", "series": [], "data": []})
    with pytest.raises(PropsInvalidError, match="unknownKey: Extra inputs are not permitted"):
        default_catalog().get("Callout").validate({"text": "x", "unknownKey": 1})


def test_chart_values_must_be_numbers() -> None:
    chart = default_catalog().get("Chart")
    props = {"type": "bar", "x_key": "m", "series": [{"key": "v", "label": "V"}], "data": [{"m": "Jan", "v": "lots"}]}
    with pytest.raises(PropsInvalidError, match=r"data\.0\.v: expected a number"):
        chart.validate(props)


async def test_chart_values_beyond_what_an_axis_can_span_are_refused_and_big_ones_draw() -> None:
    chart = default_catalog().get("Chart")
    base = {"type": "bar", "x_key": "m", "series": [{"key": "v", "label": "V"}]}
    with pytest.raises(PropsInvalidError, match=r"data\.0\.v: 1e\+308 is beyond"):
        chart.validate({**base, "data": [{"m": "a", "v": 1e308}, {"m": "b", "v": -1e308}]})
    async with Renderer() as renderer:  # the largest allowed, both signs: a finite axis
        svg = await renderer.render("Chart", {**base, "data": [{"m": "a", "v": 1e18}, {"m": "b", "v": -1e18}]}, "html")
    assert "<svg" in str(svg.data) and "nan" not in str(svg.data).lower()


def test_hundred_thousand_rows_are_refused_at_once() -> None:
    table = default_catalog().get("DataTable")
    rows = [{"a": i} for i in range(100_000)]
    started = time.perf_counter()
    with pytest.raises(PropsInvalidError, match="rows: List should have at most 500 items, not 100000"):
        table.validate({"columns": [{"key": "a", "label": "A"}], "rows": rows})
    assert time.perf_counter() - started < 0.05


def test_document_rows_are_bounded_in_total() -> None:
    section = {"table": {"columns": [{"key": "a", "label": "A"}], "rows": [{"a": 1}] * 500}}
    with pytest.raises(PropsInvalidError, match="2500 table rows in all, at most 2000"):
        default_catalog().get("Document").validate({"title": "T", "sections": [section] * 5})


def test_media_preference_follows_the_props() -> None:
    catalog = default_catalog()
    table = catalog.get("DataTable")
    short = table.validate({"columns": [{"key": "a", "label": "A"}], "rows": [{"a": 1}] * 25})
    long = table.validate({"columns": [{"key": "a", "label": "A"}], "rows": [{"a": 1}] * 26})
    assert table.media_for(short) == "image" and table.media_for(long) == "pdf"
    assert table.media_for(None) == "image"
    assert catalog.get("Document").media_for(None) == "pdf"
    assert catalog.get("Chart").media_for(None) == "image"


def test_ui_capabilities_are_strict() -> None:
    assert UiCapabilities(components=[{"name": "Chart", "version": 1}], formats=["html"]).accepts_component("Chart", 1)
    bad_declarations: list[dict[str, Any]] = [
        {"components": [{"name": "Chart", "version": 1, "extra": True}]},
        {"components": [{"name": "bad name", "version": 1}]},
        {"components": [{"name": "Chart", "version": 0}]},
        {"components": [{"name": "Chart", "version": "1"}]},
        {"components": [{"name": "Chart", "version": True}]},
        {"components": [{"name": "Chart"}, {"name": "Chart", "version": 2}]},
        {"formats": ["html", "html"]},
        {"formats": ["video"]},
        {"unknown": 1},
    ]
    for declaration in bad_declarations:
        with pytest.raises(ValidationError):
            UiCapabilities.model_validate(declaration)
    with pytest.raises(ValidationError):
        ComponentRef(name="Chart", version=1, other=1)  # type: ignore[call-arg]


def test_any_pydantic_model_works_as_props() -> None:
    class Plain(BaseModel):
        n: int

    definition = ComponentDef("Counter", 1, Plain, "<b>{{ props.n }}</b>")
    assert definition.validate({"n": "3"}).n == 3
    assert definition.text(definition.validate({"n": 3})).startswith("**Counter**")
