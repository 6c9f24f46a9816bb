"""Presentation: humanized names, confirmations, narration and result views."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import tools

# -- humanize_tool_name ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("refund_order", "Refund order"),
        ("refundOrder", "Refund order"),
        ("RefundOrder", "Refund order"),
        ("refund-order", "Refund order"),
        ("get_order_status", "Get order status"),
        ("SQLQuery", "SQL query"),
        ("runSQLQuery", "Run SQL query"),
        ("getHTTPResponse", "Get HTTP response"),
        ("sql_query", "Sql query"),
        ("purge__cache", "Purge cache"),
        ("_private_tool", "Private tool"),
        ("v2_orders", "V2 orders"),
        ("search", "Search"),
        ("x", "X"),
        ("__", "__"),  # nothing to humanize: the name as is
    ],
)
def test_humanize_tool_name(name: str, expected: str) -> None:
    assert tools.humanize_tool_name(name) == expected


def test_humanize_tool_name_refuses_non_str() -> None:
    with pytest.raises(TypeError, match="needs a str"):
        tools.humanize_tool_name(None)  # type: ignore[arg-type]


# -- resolve_confirmation --------------------------------------------------------------------------


PURGE = tools.ToolPresentation(
    label="Cache purge",
    running="Purging {key}",
    done="Purged {key}",
    tone="destructive",
    confirm=tools.ConfirmTemplate(title="Purge {key}?", verb="Purge", detail="Evicts {key} from {region}"),
)


def test_default_confirm_verb() -> None:
    assert tools.DEFAULT_CONFIRM_VERB == "Approve"


def test_a_preflight_confirmation_wins_over_templates() -> None:
    preflight = tools.PreflightReady(confirmation=tools.Confirmation(title="Purge {key} now?", verb="Go"))
    got = tools.resolve_confirmation("purge_cache", {"key": "users"}, PURGE, preflight)
    assert got == tools.Confirmation(title="Purge {key} now?", verb="Go")  # plain strings: not filled


@pytest.mark.parametrize(
    "preflight",
    [
        {"status": "ready", "confirmation": {"title": "From dict?", "verb": "Yes"}},
        tools.Confirmation(title="From dict?", verb="Yes"),
        {"title": "From dict?", "verb": "Yes"},
    ],
)
def test_preflight_confirmation_forms(preflight: Any) -> None:
    assert tools.resolve_confirmation("purge_cache", {}, PURGE, preflight) == tools.Confirmation(
        title="From dict?", verb="Yes"
    )


@pytest.mark.parametrize(
    "preflight", [None, tools.PreflightReady(), tools.PreflightDenied(reason="no"), {"status": "ready"}]
)
def test_a_preflight_without_confirmation_falls_back_to_templates(preflight: Any) -> None:
    got = tools.resolve_confirmation("purge_cache", {"key": "users", "region": "eu"}, PURGE, preflight)
    assert got == tools.Confirmation(title="Purge users?", verb="Purge", detail="Evicts users from eu")


def test_filled_confirm_reads_models_and_drops_empty_detail() -> None:
    class PurgeInput(BaseModel):
        key: str

    got = tools.resolve_confirmation("purge_cache", PurgeInput(key="users"), PURGE)
    assert got == tools.Confirmation(title="Purge users?", verb="Purge", detail="Evicts users from")
    no_detail = tools.ToolPresentation(confirm=tools.ConfirmTemplate(title="Purge {key}?", detail="{missing}"))
    assert tools.resolve_confirmation("purge_cache", {"key": "k"}, no_detail).detail is None


def test_a_confirm_that_fills_empty_falls_back() -> None:
    labelled = tools.ToolPresentation(label="Cache purge", confirm=tools.ConfirmTemplate(title="{k}", verb="{v}"))
    assert tools.resolve_confirmation("purge_cache", {}, labelled) == tools.Confirmation(
        title="Cache purge?", verb="Approve"
    )
    unlabelled = tools.ToolPresentation(confirm=tools.ConfirmTemplate(title="{k}"))
    assert tools.resolve_confirmation("purge_cache", {}, unlabelled).title == "Purge cache?"


def test_confirm_verb_defaults_in_the_template() -> None:
    presentation = tools.ToolPresentation(confirm=tools.ConfirmTemplate(title="Refund {order}?"))
    assert tools.resolve_confirmation("refund", {"order": "o1"}, presentation) == tools.Confirmation(
        title="Refund o1?", verb="Approve"
    )


def test_label_question_when_no_confirm() -> None:
    presentation = tools.ToolPresentation(label="Cache purge")
    assert tools.resolve_confirmation("purge_cache", {}, presentation) == tools.Confirmation(
        title="Cache purge?", verb="Approve"
    )


@pytest.mark.parametrize("presentation", [None, tools.ToolPresentation(), tools.ToolPresentation(running="Refunding")])
def test_humanized_name_question_when_nothing_else(presentation: tools.ToolPresentation | None) -> None:
    assert tools.resolve_confirmation("refundOrder", {"x": 1}, presentation) == tools.Confirmation(
        title="Refund order?", verb="Approve", detail=None
    )


def test_a_bad_preflight_confirmation_is_refused() -> None:
    with pytest.raises(ValidationError):
        tools.resolve_confirmation("t", {}, None, {"confirmation": {"verb": "Go"}})


# -- narration -------------------------------------------------------------------------------------


def test_narration_defaults_are_working_and_done() -> None:
    assert (tools.DEFAULT_RUNNING_TEXT, tools.DEFAULT_DONE_TEXT) == ("Working", "Done")
    for presentation in (None, tools.ToolPresentation(), tools.ToolPresentation(label="Cache purge")):
        assert tools.narrate_running(presentation, {"key": "k"}) == "Working"
        assert tools.narrate_done(presentation, {"key": "k"}) == "Done"


def test_narration_fills_running_and_done() -> None:
    assert tools.narrate_running(PURGE, {"key": "users"}) == "Purging users"
    assert tools.narrate_done(PURGE, {"key": "users"}) == "Purged users"
    assert tools.narrate_running(PURGE, {}) == "Purging"


def test_narration_never_uses_the_identifier() -> None:
    only_placeholder = tools.ToolPresentation(running="{key}", done="{key}")
    assert tools.narrate_running(only_placeholder, {}) == "Working"
    assert tools.narrate_done(only_placeholder, {}) == "Done"


# -- result views ----------------------------------------------------------------------------------


OUTPUT = {
    "evicted": 3,
    "took": 1.5,
    "ok": True,
    "orders": [
        {"id": "o1", "total": 10, "customer": {"name": "Ana"}},
        {"id": "o2", "total": None, "customer": {}},
    ],
    "log": ["started", None, "finished"],
    "summary": "Purged users",
}


def test_metrics_view() -> None:
    view = tools.MetricsView(
        fields=[
            tools.ResultField(path="evicted", label="Evicted"),
            tools.ResultField(path="took", label="Took", unit="s"),
            tools.ResultField(path="ok", label="OK"),
            tools.ResultField(path="missing", label="Missing", unit="kg"),
        ]
    )
    assert tools.fill_result_view(view, OUTPUT) == {
        "kind": "metrics",
        "items": [
            {"label": "Evicted", "value": "3"},
            {"label": "Took", "value": "1.5 s"},
            {"label": "OK", "value": "true"},
            {"label": "Missing", "value": ""},
        ],
    }


def test_table_view() -> None:
    view = tools.TableView(
        columns=[
            tools.ResultField(path="id", label="Order"),
            tools.ResultField(path="total", label="Total", unit="EUR"),
            tools.ResultField(path="customer.name", label="Customer"),
        ],
        rows="orders",
        empty="No orders",
    )
    assert tools.fill_result_view(view, OUTPUT) == {
        "kind": "table",
        "columns": ["Order", "Total", "Customer"],
        "rows": [["o1", "10 EUR", "Ana"], ["o2", "", ""]],
        "more": 0,
        "empty": None,
    }


@pytest.mark.parametrize("output", [{"orders": []}, {}, {"orders": "o1"}, {"orders": {"id": "o1"}}, None, 42])
def test_table_view_with_no_rows_says_empty(output: Any) -> None:
    view = tools.TableView(columns=[tools.ResultField(path="id", label="Order")], rows="orders", empty="No orders")
    assert tools.fill_result_view(view, output) == {
        "kind": "table",
        "columns": ["Order"],
        "rows": [],
        "more": 0,
        "empty": "No orders",
    }


def test_table_view_caps_rows_and_counts_the_rest() -> None:
    view = tools.TableView(columns=[tools.ResultField(path="n", label="N")], rows="items")
    filled = tools.fill_result_view(view, {"items": [{"n": i} for i in range(120)]})
    assert filled is not None
    assert len(filled["rows"]) + filled["more"] == 120
    assert filled["rows"][0] == ["0"] and filled["more"] > 0


def test_log_view() -> None:
    assert tools.fill_result_view(tools.LogView(lines="log"), OUTPUT) == {
        "kind": "log",
        "lines": ["started", "", "finished"],
    }
    assert tools.fill_result_view(tools.LogView(lines="summary"), OUTPUT) == {"kind": "log", "lines": ["Purged users"]}
    assert tools.fill_result_view(tools.LogView(lines="missing"), OUTPUT) == {"kind": "log", "lines": []}


def test_note_view_is_a_template_over_the_output() -> None:
    view = tools.NoteView(text="Evicted {evicted} keys in {took}s from {region}")
    assert tools.fill_result_view(view, OUTPUT) == {"kind": "note", "text": "Evicted 3 keys in 1.5s from"}


def test_elsewhere_and_none() -> None:
    assert tools.fill_result_view(tools.ElsewhereView(), OUTPUT) == {"kind": "elsewhere"}
    assert tools.fill_result_view(None, OUTPUT) is None


def test_a_dict_view_is_validated() -> None:
    assert tools.fill_result_view({"kind": "note", "text": "{summary}."}, OUTPUT) == {
        "kind": "note",
        "text": "Purged users.",
    }
    with pytest.raises(ValidationError):
        tools.fill_result_view({"kind": "chart"}, OUTPUT)


@pytest.mark.parametrize("view", ["note", 3, ["metrics"], tools.ResultField(path="a", label="A")])
def test_a_non_view_is_refused(view: Any) -> None:
    with pytest.raises(TypeError, match="needs a result view"):
        tools.fill_result_view(view, OUTPUT)


def test_result_views_never_raise_on_odd_output() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    views = [
        tools.MetricsView(fields=[tools.ResultField(path="self.self.x", label="X")]),
        tools.TableView(columns=[tools.ResultField(path="self", label="S")], rows="self"),
        tools.LogView(lines="self"),
        tools.NoteView(text="{self}"),
    ]
    for view in views:
        assert tools.fill_result_view(view, cyclic) is not None
        assert tools.fill_result_view(view, object()) is not None


def test_result_views_are_discriminated_by_kind() -> None:
    kinds = {
        "metrics": (tools.MetricsView, {"fields": [{"path": "n", "label": "N"}]}),
        "table": (tools.TableView, {"columns": [{"path": "id", "label": "Id"}], "rows": "items"}),
        "log": (tools.LogView, {"lines": "log"}),
        "note": (tools.NoteView, {"text": "Done {n}"}),
        "elsewhere": (tools.ElsewhereView, {}),
    }
    for kind, (cls, fields) in kinds.items():
        presentation = tools.ToolPresentation.model_validate({"result": {"kind": kind, **fields}})
        assert type(presentation.result) is cls
        assert presentation.result.kind == kind


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: tools.ToolPresentation(running=3), "running"),
        (lambda: tools.ToolPresentation(done=None, label=["x"]), "label"),
        (lambda: tools.ToolPresentation(tone="loud"), "tone"),
        (lambda: tools.ToolPresentation(result={"kind": "pie"}), "result"),
        (lambda: tools.ConfirmTemplate(title=None), "title"),
        (lambda: tools.ConfirmTemplate(title="t", detail=3), "detail"),
        (lambda: tools.ResultField(path=1, label="x"), "path"),
        (lambda: tools.MetricsView(fields="evicted"), "fields"),
        (lambda: tools.TableView(columns=[], rows=3), "rows"),
        (lambda: tools.LogView(lines=["a"]), "lines"),
        (lambda: tools.NoteView(text=3), "text"),
        (lambda: tools.NoteView(text="x", extra=1), "extra"),
    ],
)
def test_presentation_types_refuse_non_strings(build: Any, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        build()


def test_presentation_values_are_frozen() -> None:
    with pytest.raises(ValidationError):
        PURGE.label = "Other"  # type: ignore[misc]


def test_presentation_functions_accept_the_catalog_dict_form() -> None:
    as_dict = PURGE.model_dump(mode="json", exclude_none=True)
    assert tools.resolve_confirmation("purge_cache", {"key": "k"}, as_dict) == tools.resolve_confirmation(
        "purge_cache", {"key": "k"}, PURGE
    )
    assert tools.narrate_running(as_dict, {"key": "k"}) == "Purging k"
    assert tools.narrate_done(as_dict, {"key": "k"}) == "Purged k"
    assert tools.narrate_done({}, {"key": "k"}) == "Done"


@pytest.mark.parametrize("presentation", ["Purging {key}", 3, ["label"], tools.ConfirmTemplate(title="t")])
def test_presentation_functions_refuse_what_is_not_a_presentation(presentation: Any) -> None:
    with pytest.raises(TypeError, match="presentation must be a ToolPresentation"):
        tools.resolve_confirmation("purge_cache", {}, presentation)
    with pytest.raises(TypeError, match="presentation must be a ToolPresentation"):
        tools.narrate_running(presentation, {})
    with pytest.raises(TypeError, match="presentation must be a ToolPresentation"):
        tools.narrate_done(presentation, {})
    with pytest.raises(ValidationError, match="running"):
        tools.narrate_running({"running": 3}, {})


def test_resolve_confirmation_refuses_a_non_str_tool_name() -> None:
    with pytest.raises(TypeError, match="str tool_name"):
        tools.resolve_confirmation(None, {})  # type: ignore[arg-type]
