"""A sub-agent's approval over A2A: the task asks for input, and an answer with its taskId decides it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from gateway import Agent, Runtime
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest, ToolMessage
from gateway.stores import MemoryStore
from tools import define_tool

from .conftest import ALICE


class Key(BaseModel):
    key: str


def _answered(request: ModelRequest) -> bool:
    return isinstance(request.messages[-1], ToolMessage)


def front(request: ModelRequest, index: int) -> ScriptStep:
    if not _answered(request):
        return ScriptStep(tool_calls=[ToolCallRequest(name="ask_ops", args={"task": "purge cache:7"})])
    return ScriptStep(text=f"ops said: {request.messages[-1].content}")


def ops(request: ModelRequest, index: int) -> ScriptStep:
    if not _answered(request):
        return ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": "cache:7"})])
    return ScriptStep(text="Purged." if "purged" in str(request.messages[-1].content) else "Not purged.")


def message(parts: list[dict[str, Any]], message_id: str, **fields: Any) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": parts, **fields}


async def test_a_sub_agents_approval_is_the_tasks_input(make_gateway: Any) -> None:
    purged: list[str] = []

    @define_tool(name="purge_cache", description="Purge one cache key.", input=Key, kind="action")
    async def purge_cache(input: Key, ctx: Any) -> dict[str, str]:
        purged.append(input.key)
        return {"purged": input.key}

    agents = [
        Agent(name="front", handoffs=["ops"], model=ScriptedModel(front)),
        Agent(name="ops", model=ScriptedModel(ops)),
    ]
    runtime = Runtime(tools=[purge_cache], agents=agents, store=MemoryStore())
    gw = await make_gateway(runtime)
    sent = await gw.rpc("SendMessage", {"message": message([{"text": "please purge"}], "m-1", contextId="ctx-h1")})
    task = sent["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert purged == []
    (pending,) = await runtime.pending_approvals("ctx-h1")
    assert pending.thread_id != "ctx-h1"  # the approval lives on the sub-agent's thread

    answer = message([{"data": {"approved": True}}], "m-2", taskId=task["id"])
    done = await gw.rpc("SendMessage", {"message": answer})
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert done["result"]["task"]["status"]["message"]["parts"] == [{"text": 'ops said: "Purged."'}]
    assert purged == ["cache:7"]
    settled = await runtime.get_approval(pending.tool_call_id)
    assert settled is not None and (settled.status, settled.decided_by, settled.via) == ("approved", ALICE.id, "a2a")
