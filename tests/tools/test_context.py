"""ToolContext, Actor and the UI types a tool produces."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

import tools

# -- Actor -----------------------------------------------------------------------------------------


def test_actor_positional_and_keyword_forms_are_equal() -> None:
    assert tools.Actor("u1", ["admin"], "acme") == tools.Actor(id="u1", roles=["admin"], tenant_ref="acme")
    bare = tools.Actor("u1")
    assert (bare.id, bare.roles, bare.tenant_ref) == ("u1", [], None)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((), {"id": ""}, "id"),
        ((), {"id": "x" * 257}, "id"),
        ((), {"id": "u", "roles": "admin"}, "roles"),
        ((), {"id": "u", "role": ["admin"]}, "role"),
        ((3,), {}, "id"),
    ],
)
def test_actor_refuses_bad_fields(args: tuple[Any, ...], kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        tools.Actor(*args, **kwargs)


def test_actor_positional_misuse() -> None:
    with pytest.raises(TypeError, match="at most 3 positional"):
        tools.Actor("u", [], None, "extra")
    with pytest.raises(TypeError, match="two values for 'id'"):
        tools.Actor("u", id="v")


def test_actor_is_frozen() -> None:
    with pytest.raises(ValidationError):
        tools.Actor("u").id = "v"  # type: ignore[misc]


# -- ToolContext -----------------------------------------------------------------------------------


def test_idempotency_key_is_run_id_colon_tool_call_id(actor: tools.Actor) -> None:
    first = tools.ToolContext(actor=actor, run_id="run7", tool_call_id="call3")
    retry = tools.ToolContext(actor=actor, run_id="run7", tool_call_id="call3")
    assert first.idempotency_key == "run7:call3"
    assert first.request_id != retry.request_id  # a retry is a new request...
    assert retry.idempotency_key == first.idempotency_key  # ...with the same key


def test_context_defaults(actor: tools.Actor) -> None:
    ctx = tools.ToolContext(actor=actor)
    assert ctx.actor is actor
    assert (ctx.thread_id, ctx.run_id, ctx.tool_call_id, ctx.agent_name, ctx.channel) == ("", "", None, None, None)
    assert ctx.page_context == {}
    assert ctx.ui_capabilities is None
    assert ctx.request_id
    assert ctx.emitted == []


def test_context_fields_are_keyword_only(actor: tools.Actor) -> None:
    with pytest.raises(TypeError):
        tools.ToolContext(actor, "thread")  # type: ignore[misc]


def test_emit_ui_returns_ids_and_collects_outside_a_run(ctx: tools.ToolContext) -> None:
    first = ctx.emit_ui("Chart", {"points": [1, 2]})
    second = ctx.emit_ui("Table", {"rows": []}, fallback_text="No rows")
    assert first == "call1:ui:1"
    assert second == "call1:ui:2"
    assert [(c.component, c.id, c.version) for c in ctx.emitted] == [("Chart", first, 1), ("Table", second, 1)]
    assert ctx.emitted[1].fallback_text == "No rows"
    assert all(isinstance(c, tools.UiComponent) for c in ctx.emitted)


def test_emit_ui_without_a_tool_call_is_a_noop_collector(actor: tools.Actor) -> None:
    ctx = tools.ToolContext(actor=actor)
    component_id = ctx.emit_ui("Chart", {"a": 1})
    assert component_id == "noop:ui:1"
    assert [c.props for c in ctx.emitted] == [{"a": 1}]


def test_emit_ui_same_id_replaces_in_place(ctx: tools.ToolContext) -> None:
    ctx.emit_ui("Progress", {"pct": 10}, id="progress")
    ctx.emit_ui("Chart", {"a": 1})
    returned = ctx.emit_ui("Progress", {"pct": 90}, id="progress", version=2)
    assert returned == "progress"
    assert [(c.id, c.component, c.props, c.version) for c in ctx.emitted] == [
        ("progress", "Progress", {"pct": 90}, 2),
        ("call1:ui:1", "Chart", {"a": 1}, 1),
    ]


def test_emit_ui_pushes_every_version_to_the_sink(make_ctx: Any) -> None:
    pushed: list[tools.UiComponent] = []
    ctx = make_ctx(ui_sink=pushed.append)
    ctx.emit_ui("Progress", {"pct": 10}, id="p")
    ctx.emit_ui("Progress", {"pct": 90}, id="p")
    assert [(c.id, c.props["pct"]) for c in pushed] == [("p", 10), ("p", 90)]
    assert len(ctx.emitted) == 1


def test_emit_ui_snapshots_props(ctx: tools.ToolContext) -> None:
    props: dict[str, Any] = {"rows": [{"id": 1}]}
    ctx.emit_ui("Table", props)
    props["rows"].append({"id": 2})
    props["extra"] = True
    assert ctx.emitted[0].props == {"rows": [{"id": 1}]}


@pytest.mark.parametrize(
    ("props", "match"),
    [
        ({"when": object()}, "props must be JSON"),
        ({"nan": float("nan")}, "props must be JSON"),
        (["not", "a", "dict"], "props must be a JSON object"),
        ("text", "props must be a JSON object"),
    ],
)
def test_emit_ui_refuses_non_json_props(ctx: tools.ToolContext, props: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        ctx.emit_ui("Chart", props)
    assert ctx.emitted == []


@pytest.mark.parametrize(
    ("component", "options", "match"),
    [
        ("not a name", {}, "component"),
        ("", {}, "component"),
        ("Chart", {"version": 0}, "version"),
        ("Chart", {"version": -1}, "version"),
        ("Chart", {"id": ""}, "id"),
    ],
)
def test_emit_ui_refuses_bad_components(
    ctx: tools.ToolContext, component: str, options: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValidationError, match=match):
        ctx.emit_ui(component, {}, **options)
    assert ctx.emitted == []


# -- UiComponent / UiCapabilities ------------------------------------------------------------------


def test_ui_component_shape() -> None:
    positional = tools.UiComponent("Chart", {"a": 1})
    assert positional == tools.UiComponent(component="Chart", props={"a": 1}, version=1, id=None, fallback_text=None)
    assert tools.UiComponent("Chart").props == {}


@pytest.mark.parametrize("name", ["1Chart", "Chart-2", "Chart\n", "C" * 65, "Chärt"])
def test_ui_component_refuses_bad_names(name: str) -> None:
    with pytest.raises(ValidationError, match="component"):
        tools.UiComponent(name)


def test_ui_capabilities() -> None:
    caps = tools.UiCapabilities(components=[tools.ComponentRef("Chart", 2)], formats=["html", "text"])
    assert caps.accepts_component("Chart", 2)
    assert not caps.accepts_component("Chart", 1)
    assert not tools.UiCapabilities().accepts_component("Chart", 1)
    assert tools.UiCapabilities().formats == ["text"]
    assert set(tools.UI_FORMATS) == {"html", "image", "pdf", "text"}
    with pytest.raises(ValidationError, match="duplicate component names: Chart"):
        tools.UiCapabilities(components=[tools.ComponentRef("Chart"), tools.ComponentRef("Chart", 2)])
    with pytest.raises(ValidationError, match="duplicate formats"):
        tools.UiCapabilities(formats=["html", "html"])
    with pytest.raises(ValidationError, match="formats"):
        tools.UiCapabilities(formats=["svg"])
