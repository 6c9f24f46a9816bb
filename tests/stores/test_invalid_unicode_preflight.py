"""Texts a tool's preflight words (a denial, a confirmation) are made valid like every other text."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from gateway import Runtime, Turn
from gateway.events import ApprovalRequestedEvent, ToolDeniedEvent
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import Store
from tests.engine.conftest import purge_tool
from tools import Actor, Confirmation, PreflightDenied, PreflightReady

BAD = "\ud83d"
FFFD = "\ufffd"


@pytest.fixture
def store(any_store: Store) -> Store:
    return any_store


def utf8(value: Any) -> None:
    json.dumps(value, ensure_ascii=False).encode("utf-8")


async def test_preflight_reason_and_confirmation_from_a_tool_are_made_valid(store: Store) -> None:
    """A tool's preflight words its denial and its confirmation from data it read (not the model's)."""

    def preflight(input: Any, ctx: Any, phase: str) -> Any:
        if input.key == "deny":
            return PreflightDenied(reason=f"No such key {BAD}")
        if phase == "prepare":
            return PreflightReady(confirmation=Confirmation(title=f"Purge {BAD}?", detail=f"d {BAD}"))
        return None

    model = ScriptedModel(
        [
            ScriptStep(
                tool_calls=[
                    ToolCallRequest(name="purge_cache", args={"key": "deny"}),
                    ToolCallRequest(name="purge_cache", args={"key": "ask"}),
                ]
            ),
            ScriptStep(text="done"),
        ]
    )
    runtime = Runtime(tools=[purge_tool([], preflight=preflight)], model=model, store=store)
    thread = f"t-{uuid.uuid4().hex[:8]}"
    try:
        run_id = await runtime.start_turn(Turn(thread_id=thread, actor=Actor(id="alice"), text="purge"))
        status = await runtime.wait(run_id, timeout=10)
        run = await runtime.get_run(run_id)
        assert status == "awaiting-approval", f"the run ended {status}: {run.error}"
        events = [e async for e in runtime.events(thread)]
        utf8([e.model_dump(mode="json") for e in events])  # nothing stored without a UTF-8 form
        [denied] = [e for e in events if isinstance(e, ToolDeniedEvent)]
        [requested] = [e for e in events if isinstance(e, ApprovalRequestedEvent)]
        assert denied.reason == f"No such key {FFFD}"
        assert requested.confirmation is not None and requested.confirmation.title == f"Purge {FFFD}?"
    finally:
        await runtime.aclose()
