"""JSON nested deeper than a store can read back, from what a run writes: a tool's output, a
model's tool arguments, a component's props. The thread stays readable on every store.

Found by trying the SQL stores as an attacker (issue 14): a durable store writes what pydantic
serializes (about 250 levels) and reads back what pydantic parses (200 levels). A tool that
relays JSON it did not make (a web page's, a ``json`` column through ``data_tool``), or a model
told to, wrote a thread whose log no one could read again: its history a 500, its socket closed
(1011) on every replay, for good. Inbound JSON (frames, bodies) is held to 64 levels already.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pydantic import BaseModel

from gateway import Runtime
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import Store
from tools import define_tool

from .conftest import ALICE, connect, token_for

DEPTH = 230


def nested(depth: int = DEPTH) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


class Key(BaseModel):
    key: str = "k"


def make_runtime(store: Store, source: str) -> Runtime:
    @define_tool(name="relay", description="Relays JSON from elsewhere.", input=Key)
    async def relay(input: Key, ctx: Any) -> Any:
        if source == "props":
            ctx.emit_ui("Callout", {"tone": "info", "text": "a callout", "extra": nested()})
            return {"shown": True}
        return {"relayed": nested()}

    def script(request: Any, index: int) -> ScriptStep:
        if request.step == 0:
            args = {"key": nested()} if source == "arguments" else {"key": "k"}
            return ScriptStep(tool_calls=[ToolCallRequest(name="relay", args=args)])
        return ScriptStep(text="done")

    return Runtime(tools=[relay], model=ScriptedModel(script), store=store)


@pytest.mark.parametrize("source", ["output", "arguments", "props"])
async def test_deeply_nested_json_from_a_run_leaves_its_thread_readable(
    make_client: Any, each_store: Store, source: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client(make_runtime(each_store, source))
    headers = {"Authorization": f"Bearer {token_for(ALICE)}"}
    ws = await connect(client, token=token_for(ALICE))
    thread_id = (await ws.hello())["thread_id"]
    caplog.set_level(logging.INFO)
    frames = await ws.turn("go", timeout=10)
    assert frames[-1]["type"] == "run-finished" and frames[-1]["status"] == "completed", frames[-1]
    if source != "arguments":
        [done] = [f for f in frames if f["type"] == "tool-completed"]  # the tool ran

    history = await client.get(f"/agent/threads/{thread_id}", headers=headers)
    assert history.status == 200, await history.text()
    assert [e["seq"] for e in (await history.json())["events"]] == [f["seq"] for f in frames if "seq" in f]
    assert (await client.get(f"/agent/threads/{thread_id}/export", headers=headers)).status == 200
    again = await connect(client, token=token_for(ALICE))
    await again.hello(thread_id=thread_id)
    assert (await again.until_type("run-finished"))[0]["type"] == "run-started"  # the log replays
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
