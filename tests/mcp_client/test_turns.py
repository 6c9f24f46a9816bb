"""``McpToolset`` in turns: remote tools called by the agent loop, governed like local ones."""

from __future__ import annotations

import uuid
from typing import Any

from gateway import Runtime, Turn
from gateway.events import (
    ApprovalRequestedEvent,
    RunEvent,
    ToolCompletedEvent,
    ToolFailedEvent,
    ToolStartedEvent,
)
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest, ToolMessage
from tools import MCP_IDEMPOTENCY_KEY, Actor, McpState, McpToolset, ToolContext, ToolFailed

from .conftest import stdio_command

ALICE = Actor(id="alice", roles=["member"])
ADMIN = Actor(id="root", roles=["admin"])


def calls(*steps: tuple[str, dict[str, Any]], text: str = "Done.") -> ScriptedModel:
    script = [ScriptStep(tool_calls=[ToolCallRequest(name=name, args=args)]) for name, args in steps]
    return ScriptedModel([*script, ScriptStep(text=text)])


async def run_turn(runtime: Runtime, actor: Actor = ALICE) -> tuple[str, str, list[RunEvent]]:
    thread = f"t-{uuid.uuid4().hex[:10]}"
    run_id = await runtime.start_turn(Turn(thread_id=thread, actor=actor, text="go"))
    status = await runtime.wait(run_id, timeout=15)
    return run_id, status, [e async for e in runtime.events(thread, 0)]


def only(events: list[RunEvent], kind: type[Any]) -> Any:
    found = [e for e in events if isinstance(e, kind)]
    assert len(found) == 1, found
    return found[0]


async def test_a_remote_read_tool_runs_in_a_turn_over_stdio(make_runtime: Any) -> None:
    toolset = McpToolset(command=stdio_command(), prefix="demo")
    model = calls(("demo_lookup", {"city": "Lisbon"}), text="Lisbon is big.")
    runtime = make_runtime(tools=[toolset], model=model)
    await runtime.start()
    assert toolset.state is McpState.CONNECTED

    run_id, status, events = await run_turn(runtime)

    assert status == "completed"
    started = only(events, ToolStartedEvent)
    assert (started.tool, started.kind, started.label, started.running) == (
        "demo_lookup", "read", "City lookup", "City lookup…",
    )  # fmt: skip
    completed = only(events, ToolCompletedEvent)
    assert completed.output == {"city": "Lisbon", "population": 6000}
    assert completed.done == "City lookup: done"
    # The model saw the remote schema and description, and then the remote result.
    offered = {d.name: d for d in model.requests[0].tools}
    assert offered["demo_lookup"].description == "Facts about a city."
    assert offered["demo_lookup"].parameters["properties"]["city"]["type"] == "string"
    assert offered["demo_lookup"].parameters["required"] == ["city"]
    results = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert "6000" in results[-1].content


async def test_a_remote_write_tool_parks_and_runs_once_after_the_decision(make_runtime: Any, http_url: str) -> None:
    note = f"note-{uuid.uuid4().hex[:8]}"
    toolset = McpToolset(url=http_url, prefix="demo")
    runtime = make_runtime(tools=[toolset], model=calls(("demo_write_note", {"text": note})))
    await runtime.start()
    check = ToolContext(actor=ALICE)

    run_id, status, events = await run_turn(runtime)

    assert status == "awaiting-approval"
    requested = only(events, ApprovalRequestedEvent)
    assert requested.tool == "demo_write_note" and requested.confirmation.title == "Write a note?"
    assert note not in (await runtime.registry.invoke("demo_list_notes", {}, check))["result"]

    await runtime.decide(requested.tool_call_id, ALICE, approve=True, via="web")
    assert await runtime.wait(run_id, timeout=15) == "completed"
    stored = (await runtime.registry.invoke("demo_list_notes", {}, check))["result"]
    assert stored.split("\n").count(note) == 1


async def test_the_call_carries_the_idempotency_key_in_its_meta(make_runtime: Any, http_url: str) -> None:
    toolset = McpToolset(url=http_url, prefix="demo")
    runtime = make_runtime(tools=[toolset], model=calls(("demo_echo_meta", {})))
    await runtime.start()

    run_id, status, events = await run_turn(runtime)

    completed = only(events, ToolCompletedEvent)
    assert status == "completed"
    assert completed.output["meta"][MCP_IDEMPOTENCY_KEY] == f"{run_id}:{completed.tool_call_id}"


async def test_arguments_failing_the_remote_schema_fail_before_the_call(make_runtime: Any, http_url: str) -> None:
    toolset = McpToolset(url=http_url, prefix="demo")
    model = calls(("demo_count", {"n": -1}), ("demo_count", {"label": "x"}), ("demo_count", {"n": 2}))
    runtime = make_runtime(tools=[toolset], model=model)
    await runtime.start()

    run_id, status, events = await run_turn(runtime)

    assert status == "completed"  # the loop goes on after a failed call
    failed = [e for e in events if isinstance(e, ToolFailedEvent)]
    assert [f.error["code"] for f in failed] == ["tool_input_invalid", "tool_input_invalid"]
    assert "n: -1 is less than the minimum of 0" in failed[0].error["message"]
    assert "'n' is a required property" in failed[1].error["message"]
    assert only(events, ToolCompletedEvent).output == {"result": "2 items"}


async def test_a_remote_error_is_a_failed_call_the_model_reads(make_runtime: Any, http_url: str) -> None:
    toolset = McpToolset(url=http_url, prefix="demo")
    model = calls(("demo_broken", {}))
    runtime = make_runtime(tools=[toolset], model=model)
    await runtime.start()

    run_id, status, events = await run_turn(runtime)

    assert status == "completed"
    failed = only(events, ToolFailedEvent)
    assert failed.error["code"] == "mcp_tool_error"
    assert "the database is on fire" in failed.error["message"]
    results = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert "the database is on fire" in results[-1].content


async def test_roles_gate_remote_tools_as_any_other(make_runtime: Any, http_url: str) -> None:
    toolset = McpToolset(url=http_url, prefix="demo", roles=["admin"])
    runtime = make_runtime(tools=[toolset], model=calls(("demo_lookup", {"city": "Porto"})))
    await runtime.start()

    member_sees = [d.name for d in await runtime.registry.definitions_for(ALICE)]
    admin_sees = [d.name for d in await runtime.registry.definitions_for(ADMIN)]
    assert member_sees == [] and "demo_lookup" in admin_sees
    run_id, status, events = await run_turn(runtime, actor=ALICE)
    assert only(events, ToolFailedEvent).error["code"] == "tool_forbidden"


async def test_a_hung_server_fails_the_call_at_the_timeout_and_the_loop_goes_on(make_runtime: Any) -> None:
    toolset = McpToolset(command=stdio_command(), prefix="demo", timeout=1.0)
    model = calls(("demo_hang", {"seconds": 30}), ("demo_lookup", {"city": "Faro"}))
    runtime = make_runtime(tools=[toolset], model=model)
    await runtime.start()

    run_id, status, events = await run_turn(runtime)

    assert status == "completed"
    failed = only(events, ToolFailedEvent)
    assert failed.error == {
        "code": "tool_timeout", "message": "The MCP server demo did not answer 'hang' within 1 s",
    }  # fmt: skip
    assert only(events, ToolCompletedEvent).output["city"] == "Faro"


async def test_a_crash_mid_call_fails_it_and_later_calls_work_after_the_reconnect(toolsets: list[McpToolset]) -> None:
    from tools import ToolRegistry

    toolset = McpToolset(command=stdio_command(), prefix="demo")
    toolsets.append(toolset)
    registry = ToolRegistry([toolset])
    await registry.start()
    ctx = ToolContext(actor=ALICE)
    first_pid = await registry.invoke("demo_pid", {}, ctx)

    try:
        await registry.invoke("demo_crash", {}, ctx)
    except ToolFailed as exc:
        assert exc.code == "mcp_disconnected"
        assert "disconnected during the call to 'crash'" in str(exc)
    else:
        raise AssertionError("the crash call should fail")
    try:  # meanwhile: a clear failure, not a hang
        await registry.invoke("demo_pid", {}, ctx)
    except ToolFailed as exc:
        assert exc.code == "mcp_unavailable" and "reconnecting" in str(exc)
    else:
        raise AssertionError("a call while disconnected should fail")

    await toolset.wait_for(lambda t: t.connections == 2 and t.state is McpState.CONNECTED, timeout=15)
    assert "demo_pid" in toolset.tool_names  # the names stayed
    assert (await registry.invoke("demo_pid", {}, ctx))["result"] != first_pid["result"]
    await registry.aclose()
