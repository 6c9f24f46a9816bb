"""``McpToolset`` against a hostile server (tests/mcp_client/hostile_server.py, the ``mcp`` low-level Server).

What a remote server lists or answers is bounded before the registry, the model, a person or the
thread's log sees it, and never holds the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema  # noqa: F401  (imported once a toolset connects: its import is not the import's pause)
import mcp.client.stdio  # noqa: F401
import pytest

from tools import Actor, McpState, McpToolset, ToolContext, ToolInputInvalidError, ToolRegistry

HOSTILE = Path(__file__).with_name("hostile_server.py")
ALICE = Actor(id="alice", roles=["member"])


async def started(toolsets: list[McpToolset], mode: str, **options: Any) -> tuple[McpToolset, ToolRegistry]:
    toolset = McpToolset(command=[sys.executable, str(HOSTILE), mode], connect_timeout=10, **options)
    toolsets.append(toolset)
    registry = ToolRegistry([toolset])
    await registry.start()
    assert toolset.state is McpState.CONNECTED
    return toolset, registry


async def test_a_flood_of_tools_is_cut_and_never_holds_the_loop(
    toolsets: list[McpToolset], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tools.mcp")
    longest = 0.0

    async def ticker() -> None:  # the loop must keep turning while the tools import
        nonlocal longest
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            longest = max(longest, time.perf_counter() - before)

    tick = asyncio.create_task(ticker())
    try:
        toolset, registry = await started(toolsets, "flood")
    finally:
        tick.cancel()
    assert len(toolset.tool_names) == 128 and len(registry) == 128
    assert toolset.tool_names[:2] == ("t0", "t1")
    assert "MCP server flood lists 2000 tools; the first 128 are imported" in caplog.messages
    assert longest < 1.5  # the mcp client parses the whole listing at once; importing 2,000 tools took 4 s


async def test_endless_pages_are_cut(toolsets: list[McpToolset], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tools.mcp")
    toolset, _ = await started(toolsets, "pages")
    assert toolset.tool_names == tuple(f"p{n}" for n in range(1, 21))
    assert "MCP server pages: tools/list has over 20 pages; the rest is not read" in caplog.messages


async def test_a_huge_schema_is_skipped_and_a_huge_description_cut(
    toolsets: list[McpToolset], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tools.mcp")
    toolset, registry = await started(toolsets, "odd", kind="read")
    assert "wide" not in registry and "plain" in registry
    assert any("tool 'wide' is skipped: its inputSchema has" in m and "(at most 64000)" in m for m in caplog.messages)
    chatty = registry.get("chatty")
    assert chatty is not None and len(chatty.description) == 4000 and chatty.description.endswith("…")


async def test_a_title_is_one_short_line_of_plain_words(toolsets: list[McpToolset]) -> None:
    _, registry = await started(toolsets, "odd", kind="action")
    spoof = registry.get("spoof")
    assert spoof is not None and spoof.presentation is not None
    label = spoof.presentation.label or ""
    assert label.startswith("Check (amount) Approved by the admin x")
    assert len(label) == 80 and label.endswith("…")
    assert not any(c in label for c in "\n\x07\u202e{}")
    assert spoof.presentation.running == f"{label}…"
    blank = registry.get("blank")
    assert blank is not None and blank.presentation is not None and blank.presentation.label == "Blank"


async def test_a_pattern_that_backtracks_is_left_to_the_server(
    toolsets: list[McpToolset], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tools.mcp")
    _, registry = await started(toolsets, "odd", kind="read")
    ctx = ToolContext(actor=ALICE)
    begun = time.perf_counter()
    assert await registry.invoke("redos", {"s": "a" * 40 + "!"}, ctx) == "redos ran"
    assert time.perf_counter() - begun < 2
    assert any("tool 'redos': pattern '^(a+)+$' is left to the server" in m for m in caplog.messages)
    # A pattern that cannot run away is still checked here, before the server is called.
    with pytest.raises(ToolInputInvalidError, match="does not match"):
        await registry.invoke("digits", {"s": "12"}, ctx)
    assert await registry.invoke("digits", {"s": "123"}, ctx) == "digits ran"


async def test_images_are_bounded_in_number_and_size(toolsets: list[McpToolset]) -> None:
    _, registry = await started(toolsets, "odd", kind="read")
    ctx = ToolContext(actor=ALICE)
    many = await registry.invoke("images", {}, ctx)
    assert len(many["images"]) == 8 and len(ctx.emitted) == 8
    assert many["text"] == "[42 image(s) not shown: at most 8 of at most 1000000 bytes each are]"
    ctx = ToolContext(actor=ALICE)
    big = await registry.invoke("big_image", {}, ctx)
    assert big == "[1 image(s) not shown: at most 8 of at most 1000000 bytes each are]"
    assert ctx.emitted == []


async def test_a_server_that_stops_answering_tools_list_is_reconnected(toolsets: list[McpToolset]) -> None:
    toolset = McpToolset(command=[sys.executable, str(HOSTILE), "stall"], connect_timeout=1, kind="read")
    toolsets.append(toolset)
    registry = ToolRegistry([toolset])
    await registry.start()
    assert toolset.connections == 1
    assert await registry.invoke("poison", {}, ToolContext(actor=ALICE)) == "poisoned"
    # Its list_changed asks for a tools/list it never answers: after connect_timeout, a new connection.
    await toolset.wait_for(lambda t: t.connections == 2 and t.state is McpState.CONNECTED, timeout=10)
    assert set(toolset.tool_names) == {"poison", "plain"}


async def test_a_local_name_a_removed_tool_held_is_free_for_a_new_one(toolsets: list[McpToolset]) -> None:
    toolset, registry = await started(toolsets, "rename", kind="read")
    assert registry.get("a_b").source == "mcp:rename/a.b"  # type: ignore[union-attr]
    assert await registry.invoke("swap", {}, ToolContext(actor=ALICE)) == "swapped"
    await toolset.wait_for(
        lambda t: registry.get("a_b") is not None and registry.get("a_b").source == "mcp:rename/a_b", timeout=5
    )  # type: ignore[union-attr]
    assert await registry.invoke("a_b", {}, ToolContext(actor=ALICE)) == "a_b ran"
