"""``McpToolset`` as a source of tools: import rules, results, list changes, lifecycle, bad input."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest
from pydantic import BaseModel

from gateway import Gateway, Settings
from gateway.models import ScriptedModel, ScriptStep
from tools import (
    DEFAULT_MAX_RESULT_CHARS,
    MCP_IMAGE_COMPONENT,
    Actor,
    McpState,
    McpToolset,
    ToolContext,
    ToolFailed,
    ToolRegistry,
    UserError,
    define_tool,
)

from .conftest import free_port, start_http_server, stdio_command, stop

ALICE = Actor(id="alice", roles=["member"])


async def started(toolsets: list[McpToolset], *tools: Any, **options: Any) -> tuple[McpToolset, ToolRegistry]:
    toolset = McpToolset(**options)
    toolsets.append(toolset)
    registry = ToolRegistry([*tools, toolset])
    await registry.start()
    return toolset, registry


async def test_a_schema_that_is_not_valid_json_schema_skips_only_that_tool(
    toolsets: list[McpToolset], http_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tools.mcp")
    toolset, registry = await started(toolsets, url=http_url, prefix="demo")

    assert toolset.state is McpState.CONNECTED
    assert "demo_bad_schema" not in registry and "demo_not_object" not in registry
    assert {"demo_lookup", "demo_count", "demo_toggle"} <= set(toolset.tool_names)
    skipped = [r.getMessage() for r in caplog.records if "is skipped" in r.getMessage()]
    assert skipped == [
        "MCP server demo: tool 'bad_schema' is skipped: its inputSchema is not valid JSON Schema: "
        "12 is not valid under any of the given schemas",
        "MCP server demo: tool 'not_object' is skipped: its inputSchema is not a JSON Schema of type object",
    ]
    kinds = {d.name: d.kind for d in await registry.definitions_for(ALICE)}
    assert kinds["demo_lookup"] == "read" and kinds["demo_write_note"] == "action"


async def test_the_app_may_choose_the_kind(toolsets: list[McpToolset], http_url: str) -> None:
    _, every_read = await started(toolsets, url=http_url, prefix="r", kind="read")
    _, by_name = await started(
        toolsets, url=http_url, prefix="f", kind=lambda remote: "action" if remote.name == "lookup" else "read"
    )
    assert every_read.get("r_write_note").kind == "read"  # type: ignore[union-attr]
    assert by_name.get("f_lookup").kind == "action"  # type: ignore[union-attr]
    assert by_name.get("f_write_note").kind == "read"  # type: ignore[union-attr]


async def test_a_huge_result_is_cut_before_the_model_sees_it(toolsets: list[McpToolset], http_url: str) -> None:
    toolset, registry = await started(toolsets, url=http_url, prefix="demo", max_result_chars=1000)
    output = await registry.invoke("demo_huge", {"chars": 50_000}, ToolContext(actor=ALICE))

    assert isinstance(output, str)
    assert output.startswith('{"result": "xxxx')
    assert output.endswith("[truncated: the result had 50014 characters; the first 1000 are shown]")
    assert len(output) < 1100
    assert DEFAULT_MAX_RESULT_CHARS == 32_000


async def test_an_image_becomes_a_ui_component(toolsets: list[McpToolset], http_url: str) -> None:
    toolset, registry = await started(toolsets, url=http_url, prefix="demo")
    ctx = ToolContext(actor=ALICE, tool_call_id="call-1")
    output = await registry.invoke("demo_picture", {}, ctx)

    [shown] = ctx.emitted
    assert shown.component == MCP_IMAGE_COMPONENT and shown.props["mime_type"] == "image/png"
    assert shown.props["data"].startswith("iVBORw0KGgo")
    assert shown.fallback_text == "An image from demo (image/png, 70 bytes)."
    assert output == {"text": "", "images": [{"mime_type": "image/png", "bytes": 70, "ui_id": shown.id}]}


async def test_list_changed_adds_and_retires_tools(toolsets: list[McpToolset], http_url: str) -> None:
    toolset, registry = await started(toolsets, url=http_url, prefix="demo")
    ctx = ToolContext(actor=ALICE)
    assert "demo_added" not in registry

    assert (await registry.invoke("demo_toggle", {}, ctx))["result"] == "added"
    await toolset.wait_for(lambda t: "demo_added" in t.tool_names, timeout=10)
    assert (await registry.invoke("demo_added", {}, ctx))["result"] == "I am new"
    assert "demo_added" in [d.name for d in await registry.definitions_for(ALICE)]

    assert (await registry.invoke("demo_toggle", {}, ctx))["result"] == "removed"  # the server as it was
    await toolset.wait_for(lambda t: "demo_added" not in t.tool_names, timeout=10)
    assert "demo_added" not in registry


async def test_a_name_already_taken_stays_its_first_owners(
    toolsets: list[McpToolset], http_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    class City(BaseModel):
        city: str

    local = define_tool(name="demo_lookup", description="Ours.", input=City, execute=lambda i, c: {"ours": True})
    caplog.set_level(logging.WARNING, logger="tools.registry")
    toolset, registry = await started(toolsets, local, url=http_url, prefix="demo")

    assert registry.get("demo_lookup") is local
    assert "demo_lookup" not in toolset.tool_names and "demo_count" in toolset.tool_names
    assert [r.getMessage() for r in caplog.records if "name is taken" in r.getMessage()] == [
        "tool 'demo_lookup' of toolset 'demo' is not added: the name is taken (by tests.mcp_client.test_toolset."
        "test_a_name_already_taken_stays_its_first_owners.<locals>.<lambda>)"
    ]


async def test_a_server_down_at_start_does_not_stop_it_and_its_tools_join_later(toolsets: list[McpToolset]) -> None:
    port = free_port()
    toolset, registry = await started(toolsets, url=f"http://127.0.0.1:{port}/mcp", prefix="late")
    assert toolset.state is McpState.DISCONNECTED and len(registry) == 0

    process = start_http_server(port)
    try:
        await toolset.wait_for(lambda t: t.state is McpState.CONNECTED, timeout=20)
        assert "late_lookup" in registry
        await registry.aclose()
        assert toolset.state is McpState.CLOSED and len(registry) == 0
    finally:
        stop(process)


async def test_a_restarted_http_server_fails_the_old_session_clearly_and_is_reconnected(
    toolsets: list[McpToolset],
) -> None:
    port = free_port()
    process = start_http_server(port)
    try:
        toolset, registry = await started(toolsets, url=f"http://127.0.0.1:{port}/mcp", prefix="demo")
        ctx = ToolContext(actor=ALICE)
        before = (await registry.invoke("demo_pid", {}, ctx))["result"]
        stop(process)
        process = start_http_server(port)  # a new process: it knows nothing of the old session

        with pytest.raises(ToolFailed, match="disconnected during the call to 'pid'") as failed:
            await registry.invoke("demo_pid", {}, ctx)
        assert failed.value.code == "mcp_disconnected"
        await toolset.wait_for(lambda t: t.connections == 2 and t.state is McpState.CONNECTED, timeout=20)
        assert (await registry.invoke("demo_pid", {}, ctx))["result"] != before
    finally:
        stop(process)


async def test_a_gateway_lists_a_toolset_with_its_tools_and_serves_them(aiohttp_client: Any, http_url: str) -> None:
    gateway = Gateway(tools=[McpToolset(url=http_url, prefix="demo")], model=ScriptedModel([ScriptStep(text="ok")]))
    settings = Settings(_env_file=None, secret="a-test-secret-for-mcp-toolsets")  # type: ignore[call-arg]
    client = await aiohttp_client(gateway.create_app(settings))

    tools = await (await client.get("/agent/tools?agent=*")).json()
    listed = {t["name"]: t for t in tools}
    assert listed["demo_lookup"]["kind"] == "read"
    assert listed["demo_lookup"]["presentation"]["label"] == "City lookup"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "exactly one of url"),
        ({"url": "http://x/mcp", "command": ["x"]}, "exactly one of url"),
        ({"url": "ftp://x"}, "must be an http(s) URL"),
        ({"command": "python server.py"}, "non-empty list of str"),
        ({"command": [sys.executable], "headers": {"a": "b"}}, "headers=...) applies to url"),
        ({"url": "http://x/mcp", "env": {"A": "1"}}, "apply to command"),
        ({"url": "http://x/mcp", "kind": "write"}, "kind=...) must be"),
        ({"url": "http://x/mcp", "timeout": 0}, "timeout=...) must be a positive"),
        ({"url": "http://x/mcp", "roles": "admin"}, "roles=...) must be a list of str"),
        ({"url": "http://x/mcp", "max_result_chars": 10}, "at least 100"),
    ],
)
def test_bad_options_are_refused_with_the_reason(options: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        McpToolset(**options)


async def test_lifecycle_misuse_is_a_runtime_error(toolsets: list[McpToolset]) -> None:
    toolset, registry = await started(toolsets, command=stdio_command(), prefix="demo")
    with pytest.raises(RuntimeError, match="on a started ToolRegistry"):
        registry.register(McpToolset(command=stdio_command()))
    with pytest.raises(RuntimeError, match="Cannot start McpToolset 'demo' twice"):
        await toolset.start(registry)
    await registry.aclose()
    await registry.aclose()  # idempotent
    with pytest.raises(RuntimeError, match="Cannot start a closed ToolRegistry"):
        await registry.start()
