"""The event vocabulary: every type round-trips through JSON exactly."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.events import (
    RUN_EVENT_ADAPTER,
    ApprovalRequestedEvent,
    ApprovalSettledEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextDeltaEvent,
    TextEndEvent,
    ToolCompletedEvent,
    ToolDeniedEvent,
    ToolFailedEvent,
    ToolStartedEvent,
    Turn,
    UiEvent,
    Usage,
)
from tools import Actor, Confirmation, UiCapabilities

BASE = {"seq": 7, "thread_id": "t1", "run_id": "r1", "at": "2026-11-29T20:00:00.000+00:00"}

SAMPLES = [
    RunStartedEvent(**BASE, agent="default"),
    TextDeltaEvent(**BASE, message_id="m1", delta="Hel"),
    TextEndEvent(**BASE, message_id="m1", text="Hello ✓ — ünïcode"),
    ToolStartedEvent(
        **BASE, tool_call_id="c1", tool="get_weather", kind="read", input={"city": "Lisbon"},
        label="Weather", running="Checking Lisbon", icon="sun",
    ),
    ToolCompletedEvent(
        **BASE, tool_call_id="c1", tool="get_weather", output={"temp": 21.5, "tags": [1, None]},
        done="Checked Lisbon", result={"kind": "note", "text": "21.5"},
    ),
    ToolFailedEvent(**BASE, tool_call_id="c1", tool="x", error={"code": "tool_error", "message": "boom"}),
    ToolDeniedEvent(**BASE, tool_call_id="c1", tool="x", reason="No such order"),
    ApprovalRequestedEvent(
        **BASE, tool_call_id="c2", tool="purge_cache", input={"key": "k"},
        confirmation=Confirmation(title="Purge k?", verb="Purge", detail=None), tone="destructive",
        approver="requester", expires_at="2026-11-30T20:00:00+00:00",
    ),
    ApprovalSettledEvent(**BASE, tool_call_id="c2", status="approved", decided_by="alice", via="web"),
    UiEvent(
        **BASE, id="c1:ui:1", component="Chart", version=2, props={"a": [1, 2]}, fallback_text="t", tool_call_id="c1"
    ),
    RunFinishedEvent(**BASE, status="awaiting-approval", usage=Usage(input_tokens=3, output_tokens=4, model_calls=1)),
    RunErrorEvent(**BASE, code="model_error", message="down"),
]  # fmt: skip


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.type)
def test_every_event_round_trips_through_json(event: object) -> None:
    raw = RUN_EVENT_ADAPTER.dump_json(event)  # type: ignore[arg-type]
    again = RUN_EVENT_ADAPTER.validate_json(raw)
    assert type(again) is type(event)
    assert again == event
    assert RUN_EVENT_ADAPTER.dump_json(again) == raw


def test_every_event_type_is_covered() -> None:
    assert {e.type for e in SAMPLES} == {
        "run-started", "text-delta", "text-end", "tool-started", "tool-completed", "tool-failed",
        "tool-denied", "approval-requested", "approval-settled", "ui", "run-finished", "run-error",
    }  # fmt: skip


def test_unknown_type_and_extra_fields_are_refused() -> None:
    with pytest.raises(ValidationError):
        RUN_EVENT_ADAPTER.validate_python({**BASE, "type": "nope"})
    with pytest.raises(ValidationError):
        RUN_EVENT_ADAPTER.validate_python({**BASE, "type": "run-started", "agent": "a", "extra": 1})


def test_turn_validates_its_fields() -> None:
    actor = Actor(id="u1")
    ok = Turn(thread_id="t1", actor=actor, text="hi", ui_capabilities=UiCapabilities(formats=["html"]))
    assert ok.channel == "api" and ok.page_context == {}
    with pytest.raises(ValidationError):
        Turn(thread_id="", actor=actor, text="hi")
    with pytest.raises(ValidationError):
        Turn(thread_id="t", actor=actor, text="x" * 32_001)
    with pytest.raises(ValidationError):
        Turn.model_validate({"thread_id": "t", "actor": {"id": "u"}, "text": "x", "bogus": 1})


def test_an_attachment_name_keeps_no_control_or_bidirectional_characters() -> None:
    from gateway.events import Attachment

    spoof = Attachment(id="att_1", name="inv\u202egnp.exe\x07\u2066x\u2069\u200f", mime="image/png", size=1)
    assert spoof.name == "invgnp.exex"
    assert (
        Attachment(id="att_2", name="relatório 2026.pdf", mime="application/pdf", size=1).name == "relatório 2026.pdf"
    )
