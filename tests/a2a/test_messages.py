"""What a caller's message means, what it may receive, and how a failed run reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from a2a.helpers import get_message_text, new_data_part
from a2a.types import Message, Part, Role, TaskState
from a2a.utils.errors import InvalidParamsError

from channels.a2a._inbound import MAX_TURN_TEXT, Decision, OutputModes, read_decision, turn_text
from gateway import Runtime
from gateway.models import ScriptedModel, ScriptStep

from .conftest import collect, send_request


def message(*parts: Part) -> Message:
    return Message(role=Role.ROLE_USER, message_id="m", parts=list(parts))


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ([new_data_part({"approved": True})], Decision(approve=True)),
        (
            [Part(text="see data"), new_data_part({"approved": False, "reason": "too much", "toolCallId": "tc_1"})],
            Decision(approve=False, reason="too much", tool_call_id="tc_1"),
        ),
        ([new_data_part({"approved": True, "tool_call_id": "tc_2"})], Decision(approve=True, tool_call_id="tc_2")),
        ([new_data_part({"approved": True, "remember": True})], Decision(approve=True, remember=True)),
        ([new_data_part({"approved": False, "remember": True})], Decision(approve=False)),  # nothing to remember
        ([Part(text="Yes please")], Decision(approve=True)),
        ([Part(text="  OK")], Decision(approve=True)),
        ([Part(text="No, keep it")], Decision(approve=False, reason="keep it")),
        ([Part(text="não")], Decision(approve=False)),  # the word itself is no reason
        ([Part(text="reject: too expensive.")], Decision(approve=False, reason="too expensive")),
    ],
)
def test_approval_answers(parts: list[Part], expected: Decision) -> None:
    assert read_decision(message(*parts)) == expected


@pytest.mark.parametrize(
    "parts",
    [
        [Part(text="maybe later")],
        [new_data_part({"approved": "yes"})],
        [Part(text="")],
        [Part(text="Okay, what exactly does this refund do?")],  # a question, not a yes
        [Part(text="sure? how much is it")],
        [Part(text="do it tomorrow, not now")],
    ],
)
def test_answers_that_decide_nothing_are_refused(parts: list[Part]) -> None:
    with pytest.raises(InvalidParamsError, match="waits for an approval"):
        read_decision(message(*parts))


def test_a_remember_that_is_no_boolean_is_refused() -> None:
    with pytest.raises(InvalidParamsError, match="remember, when given, is true or false"):
        read_decision(message(new_data_part({"approved": True, "remember": "always"})))


def test_turn_text_joins_text_data_and_files() -> None:
    text = turn_text(
        message(
            Part(text="Compare these"),
            new_data_part({"order": 1042, "items": ["a"]}),
            Part(url="https://example.com/a.pdf", filename="a.pdf", media_type="application/pdf"),
            Part(raw=b"\x00\x01", media_type="image/png"),
        )
    )
    lines = text.split("\n")
    assert lines[0] == "Compare these" and json.loads(lines[1]) == {"order": 1042, "items": ["a"]}
    assert lines[2:] == ["[a.pdf](https://example.com/a.pdf)", "[file: image/png, not read]"]
    with pytest.raises(InvalidParamsError, match="no text"):
        turn_text(message(Part(text="   ")))
    with pytest.raises(InvalidParamsError, match="longer than"):
        turn_text(message(Part(text="x" * (MAX_TURN_TEXT + 1))))


@pytest.mark.parametrize(
    ("modes", "media", "json", "formats"),
    [
        ([], True, True, ()),
        (["text/plain", "application/json"], True, True, ()),
        (["text/plain"], True, False, ()),
        (["image/png", "application/json"], True, True, ("image",)),
        (["image/*"], True, False, ("image",)),
        (["application/pdf; q=0.5", "application/json"], True, True, ("pdf",)),
        (["*/*"], True, True, ("image", "pdf")),
        (["*/*"], False, True, ()),
    ],
)
def test_output_modes(modes: list[str], media: bool, json: bool, formats: tuple[str, ...]) -> None:
    assert OutputModes.parse(modes, media=media) == OutputModes(json=json, formats=formats)  # type: ignore[arg-type]


async def test_a_failed_run_is_a_failed_task_with_the_error(make_gateway: Any) -> None:
    gw = await make_gateway(Runtime(model=ScriptedModel([ScriptStep(error="the model is down")])))
    client = await gw.sdk(streaming=True)
    events = await collect(client.send_message(send_request("hello")))
    last = events[-1].status_update.status
    assert last.state == TaskState.TASK_STATE_FAILED
    assert get_message_text(last.message) == "the model is down"
    await client.close()
