"""The starter app ``agora-gateway init`` writes, run offline on the default model: its prompts work."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway import Gateway, Settings
from gateway.events import ApprovalRequestedEvent, ToolDeniedEvent

from .conftest import Chat


@pytest.fixture
async def starter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Chat]:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "init", str(tmp_path / "shop")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    monkeypatch.syspath_prepend(str(tmp_path / "shop"))
    monkeypatch.delitem(sys.modules, "starter_app", raising=False)
    monkeypatch.delitem(sys.modules, "starter_app.tools", raising=False)
    app = importlib.import_module("starter_app").gateway
    assert isinstance(app, Gateway)
    runtime = app.runtime(Settings(model="demo", secret="starter-app-tests-secret-0123456789"))
    try:
        yield Chat(runtime=runtime)
    finally:
        await runtime.aclose()
        sys.modules.pop("starter_app", None)
        sys.modules.pop("starter_app.tools", None)


async def test_the_starter_apps_prompts_drive_its_tools_offline(starter: Chat) -> None:
    said = await starter.say("hello")
    assert said.text == (
        "Hello! I'm the offline model: I follow simple rules, not a real language model. "
        "I can use these tools; name one in a few words, with what it needs:\n"
        "- *Get order*: Look up one order: its status, items, total and dates.\n"
        "- *Cancel order*: Cancel an order that has not shipped yet."
    )

    said = await starter.say("show order 1001")
    assert said.calls == [("get_order", {"order_id": "1001"})] and said.components == ["Timeline"]
    assert said.text == "Here is what *Get order* found."

    said = await starter.say("cancel order 1002")
    (requested,) = said.of(ApprovalRequestedEvent)
    assert requested.input["order_id"] == "1002"
    said = await starter.decide(said, approve=True)
    assert said.status == "completed" and said.text == "*Cancel order* went through."

    said = await starter.say("cancel order 1001")
    (denied,) = said.of(ToolDeniedEvent)
    assert said.text == f"I did not go ahead. {denied.reason}" and "1001 is shipped" in denied.reason

    said = await starter.say("cancel my order")
    assert said.calls == [] and said.text == "Which order id?"


async def test_the_starter_app_says_plainly_when_an_order_does_not_exist(starter: Chat) -> None:
    said = await starter.say("show order 9999")
    assert said.calls == [("get_order", {"order_id": "9999"})] and said.components == []
    assert "There is no order 9999." in said.text
