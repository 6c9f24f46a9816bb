"""Handoffs on the web socket: nested lines, and the child's approval decided by the same person."""

from __future__ import annotations

from typing import Any

from gateway import Agent, Runtime
from gateway.models import ToolCallRequest

from ..web.conftest import ALICE, BOB, connect, make_client, token_for
from .conftest import asks, purge_tool, replying

__all__ = ["make_client"]  # the web tests' fixture

PURGE = ToolCallRequest(name="purge_cache", args={"key": "sessions:42"})


async def test_the_childs_approval_reaches_the_same_person_on_the_socket(make_client: Any) -> None:
    executed: list[str] = []
    ops = Agent(name="ops", model=replying(PURGE, text="Purged it."))
    main = Agent(name="main", handoffs=["ops"], model=asks("ask_ops", "Purge sessions:42", then="All done."))
    runtime = Runtime(tools=[purge_tool(executed)], agents=[main, ops])
    client = await make_client(runtime)
    alice = await connect(client, token=token_for(ALICE))
    await alice.hello()
    frames = await alice.turn("purge it")
    assert frames[-1]["status"] == "awaiting-approval"
    ask = next(f for f in frames if f["type"] == "tool-started" and f["tool"] == "ask_ops")
    request = next(f for f in frames if f["type"] == "approval-requested")
    assert request["parent_tool_call_id"] == ask["tool_call_id"] and request["sub_agent"] == "ops"
    assert request["run_id"] == ask["run_id"] == frames[-1]["run_id"]
    assert request["confirmation"]["title"] == "Purge sessions:42?"

    bob = await connect(client, token=token_for(BOB))
    await bob.hello()
    await bob.send({"type": "approve", "tool_call_id": request["tool_call_id"], "id": "b"})
    assert (await bob.recv())["code"] == "approval_forbidden"

    await alice.send({"type": "approve", "tool_call_id": request["tool_call_id"], "id": "a"})
    after = await alice.until(lambda f: f.get("type") == "run-finished" and f.get("status") == "completed")
    assert any(f.get("id") == "a" and f.get("status") == "approved" for f in after)
    nested = [f for f in after if f.get("parent_tool_call_id") == ask["tool_call_id"]]
    assert [f["type"] for f in nested] == ["approval-settled", "tool-started", "tool-completed"]
    assert nested[-1]["done"] == "Purged sessions:42"
    texts = [f["text"] for f in after if f["type"] == "text-end"]
    assert texts == ["All done."]
    assert len(executed) == 1
    for peer in (alice, bob):
        await peer.ws.close()
