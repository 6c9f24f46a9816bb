"""``AgUiTranslator`` on scripted event logs, read as a transcript."""

from __future__ import annotations

from typing import Any

from ag_ui.core import BaseEvent

from channels.ag_ui import AgUiTranslator
from gateway.events import (
    ApprovalRequestedEvent,
    ApprovalSettledEvent,
    RunErrorEvent,
    RunEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextDeltaEvent,
    TextEndEvent,
    ToolFailedEvent,
    UiEvent,
    Usage,
)
from tools import Confirmation

from .conftest import EVENT

T = "t1"


def ev(cls: type[Any], run: str = "run_a", **fields: Any) -> Any:
    return cls(thread_id=T, run_id=run, **fields)


def translator(names: dict[str, str] | None = None) -> AgUiTranslator:
    async def deliver(event: UiEvent) -> dict[str, Any]:
        return {"form": "text", "fallbackText": f"[{event.component}]"}

    async def name(event: RunEvent) -> str:
        return (names or {}).get(f"{event.type} {event.run_id}", event.run_id)

    return AgUiTranslator(T, deliver_ui=deliver, name_run=name)


def line(event: BaseEvent) -> str:
    data = EVENT.validate_python(event.model_dump(by_alias=True)).model_dump(by_alias=True, mode="json")
    keys = ("runId", "messageId", "toolCallId", "delta", "code", "name")
    parts = [data["type"], *(str(data[k]) for k in keys if k in data)]
    if data["type"] == "RUN_FINISHED":
        parts.append(str((data.get("outcome") or {}).get("type")))
    return " ".join(parts)


async def transcript(tr: AgUiTranslator, events: list[Any]) -> list[str]:
    return [line(out) for event in events for out in await tr.translate(event)]


async def test_a_message_read_half_way_is_reopened_on_the_new_stream() -> None:
    tr = translator({"run-started run_a": "client-run"})
    await tr.prime([ev(RunStartedEvent, agent="a"), ev(TextDeltaEvent, message_id="m1", delta="Hel")])
    assert tr.open and tr.opened_by is not None and tr.opened_by.type == "run-started"
    assert [line(e) for e in tr.reopen("client-run")] == [
        "RUN_STARTED client-run",
        "TEXT_MESSAGE_START m1",
    ]
    events = [
        ev(TextDeltaEvent, message_id="m1", delta="lo"),
        ev(TextEndEvent, message_id="m1", text="Hello"),
        ev(RunFinishedEvent, status="completed", usage=Usage(input_tokens=3, output_tokens=2, model_calls=1)),
    ]
    assert await transcript(tr, events) == [
        "TEXT_MESSAGE_CONTENT m1 lo",
        "TEXT_MESSAGE_END m1",
        "RUN_FINISHED client-run success",
    ]


async def test_edges_of_the_log() -> None:
    tr = translator({"run-started run_a": "c1", "approval-settled run_a": "c2"})
    confirmation = Confirmation(title="Purge k?", verb="Purge", detail=None)
    events = [
        ev(RunStartedEvent, agent="a"),
        # A message whose pieces were never seen arrives whole.
        ev(TextEndEvent, message_id="m1", text="Working on it"),
        # A call refused before it started is announced, then answered.
        ev(ToolFailedEvent, tool_call_id="c-bad", tool="nope", error={"code": "tool_not_found", "message": "x"}),
        ev(UiEvent, id="u1", component="Callout", props={"tone": "info", "text": "hi"}),
        ev(
            ApprovalRequestedEvent,
            tool_call_id="c-act",
            tool="purge",
            input={"key": "k"},
            confirmation=confirmation,
            approver="requester",
            expires_at="2030-01-01T00:00:00+00:00",
        ),
        ev(RunFinishedEvent, status="awaiting-approval"),
        # The approval lapsed: a segment no request asked for.
        ev(ApprovalSettledEvent, tool_call_id="c-act", status="expired", via="expiry"),
        ev(RunErrorEvent, code="model_error", message="down"),
        ev(RunFinishedEvent, status="failed"),
        ev(RunStartedEvent, run="run_b", agent="a"),
        ev(RunFinishedEvent, run="run_b", status="cancelled"),
        ev(RunStartedEvent, run="run_c", agent="a"),
        ev(RunFinishedEvent, run="run_c", status="failed"),
    ]
    assert await transcript(tr, events) == [
        "RUN_STARTED c1",
        "TEXT_MESSAGE_START m1",
        "TEXT_MESSAGE_CONTENT m1 Working on it",
        "TEXT_MESSAGE_END m1",
        "TOOL_CALL_START c-bad",
        "TOOL_CALL_END c-bad",
        "TOOL_CALL_RESULT c-bad-result c-bad",
        "CUSTOM agora.ui",
        "TOOL_CALL_START c-act",
        'TOOL_CALL_ARGS c-act {"key":"k"}',
        "TOOL_CALL_END c-act",
        "CUSTOM agora.approval-requested",
        "RUN_FINISHED c1 interrupt",
        "RUN_STARTED c2",
        "CUSTOM agora.approval-settled",
        "RUN_ERROR model_error",
        "RUN_STARTED run_b",
        "RUN_FINISHED run_b cancelled",
        "RUN_STARTED run_c",
        "RUN_ERROR run_failed",
    ]
    assert not tr.open


async def test_priming_renders_nothing_and_keeps_the_timestamps_of_the_log() -> None:
    rendered: list[str] = []

    async def deliver(event: UiEvent) -> dict[str, Any]:
        rendered.append(event.id)
        return {"form": "text", "fallbackText": "x"}

    async def name(event: RunEvent) -> str:
        return "named"

    tr = AgUiTranslator(T, deliver_ui=deliver, name_run=name)
    ui = ev(UiEvent, id="u1", component="Callout", props={"tone": "info", "text": "hi"})
    await tr.prime([ev(RunStartedEvent, agent="a"), ui])
    assert rendered == [] and tr.run_id == "run_a"
    (custom,) = await tr.translate(ev(UiEvent, id="u2", component="Callout", props={}, at="2030-01-01T00:00:00+00:00"))
    assert rendered == ["u2"] and custom.timestamp == 1893456000000
