"""A sub-agent's approval over AG-UI: the parent's run ends with its interrupt, ``resume[]`` decides it."""

from __future__ import annotations

from typing import Any

from gateway import SERVICES, Agent, Gateway
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest, ToolMessage

from .conftest import MakeClient, Shop, approve, new_id, of_type, run, run_input, shop_tools


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


def app(shop: Shop) -> Gateway:
    return Gateway(
        tools=shop_tools(shop),
        agents=[
            Agent(name="front", handoffs=["ops"], model=ScriptedModel(front)),
            Agent(name="ops", model=ScriptedModel(ops)),
        ],
    )


async def test_a_sub_agents_approval_is_an_interrupt_of_the_parents_run(make_client: MakeClient, shop: Shop) -> None:
    client = await make_client(gateway=app(shop))
    runtime = client.app[SERVICES].runtime
    thread_id = new_id("t")
    frames = await run(client, run_input(thread_id, "please purge"))
    outcome: Any = frames[-1].data["outcome"]
    assert outcome["type"] == "interrupt" and len(outcome["interrupts"]) == 1
    call_id = outcome["interrupts"][0]["id"]
    approval = await runtime.get_approval(call_id)
    assert approval is not None and approval.thread_id != thread_id  # it lives on the child's thread
    parent_run = frames[0].data["metadata"]["agoraRunId"]
    assert shop.executed == []

    resumed = await run(client, run_input(thread_id, run_id="run-2", resume=[approve(call_id)]))
    assert resumed[0].data["metadata"]["agoraRunId"] == parent_run
    assert resumed[-1].data["outcome"]["type"] == "success"
    said = "".join(f.data["delta"] for f in of_type(resumed, "TEXT_MESSAGE_CONTENT"))
    assert said == 'ops said: "Purged."'
    assert shop.executed == ["cache:7"]
    settled = await runtime.get_approval(call_id)
    assert settled is not None and (settled.status, settled.via) == ("approved", "ag-ui")
    assert (await runtime.get_run(parent_run)).status == "completed"
